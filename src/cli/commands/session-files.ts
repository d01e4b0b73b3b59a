import { join } from "node:path";
import type { Command } from "commander";
import { type CoordinationError, formatLocated, type LocatedProblem } from "../../coordination/errors.js";
import type { NamedReport, Report, Severity } from "../../coordination/index.js";
import { CliError, printJson, printLine, readInput } from "../io.js";
import { type Common, open } from "./session-log-update.js";
import { coordination, leaf, severityOption, suffixOption } from "./session-shared.js";

/** `acp session report …`: the agents' standard reports. */
export function registerReport(session: Command): void {
  const report = session.command("report").description("agents' standard reports (reports/AGENT.json)");
  leaf(report, "write", "validate and write an agent's report (JSON from FILE or stdin)")
    .argument("<agent>")
    .argument("[file]", "report JSON (default: stdin)")
    .action(async (agent: string, file: string | undefined, o: Common) => {
      const s = await open(o);
      const { CoordinationError } = await coordination();
      const { parseJsonText } = await import("../../coordination/validate.js");
      const { text, name } = await readInput(file);
      let written: Report;
      try {
        written = await s.writeReport(agent, parseJsonText(text, name), { file: name, text });
      } catch (err) {
        if (!(err instanceof CoordinationError)) throw err;
        throw everyProblem(err, o.json);
      }
      if (o.json) printJson(written);
      else printLine(`wrote reports/${agent}.json (${written.findings.length} findings)`);
    });
  leaf(report, "show", "one agent's report")
    .argument("<agent>")
    .action(async (agent: string, o: Common) => {
      const s = await open(o);
      const r = await s.readReport(agent, { onWarning: (w) => warnAbout(s.paths.reports, agent, w) });
      const { formatReport } = await import("../../coordination/format.js");
      if (o.json) printJson(r);
      else printLine(formatReport(r));
    });
  leaf(report, "summaries", "every report's summary")
    .addOption(suffixOption())
    .action(async (o: Common & { suffix?: string }) => {
      const reports = await readValidReports(o);
      if (o.json) printJson(reports.map(({ agent, report: r }) => ({ agent, summary: r.summary })));
      else for (const { agent, report: r } of reports) printLine(`${agent}: ${r.summary}`);
    });
  leaf(report, "findings", "findings across all reports")
    .addOption(severityOption())
    .addOption(suffixOption())
    .action(async (o: Common & { severity?: Severity; suffix?: string }) => {
      const { reportFindings } = await coordination();
      const { formatFinding } = await import("../../coordination/format.js");
      const findings = reportFindings(await readValidReports(o), o.severity);
      if (o.json) printJson(findings);
      else printLine(findings.length === 0 ? "no findings" : findings.map(formatFinding).join("\n"));
    });
  leaf(report, "aggregate", "totals across reports: findings by severity, automation suggestions, artifacts")
    .addOption(suffixOption())
    .action(async (o: Common & { suffix?: string }) => {
      const { aggregateReports } = await coordination();
      const { formatAggregate } = await import("../../coordination/format.js");
      const aggregate = aggregateReports(await readValidReports(o));
      if (o.json) printJson(aggregate);
      else printLine(formatAggregate(aggregate));
    });
}

/** The reports that read back; each one that does not is skipped with a warning naming file and field. */
async function readValidReports(o: Common & { suffix?: string }): Promise<NamedReport[]> {
  const s = await open(o);
  const reports = await s.readReports({
    ...(o.suffix !== undefined && { suffix: o.suffix }),
    onInvalid: (err) => process.stderr.write(`acp: warning: skipped a report: ${err.message}\n`),
  });
  for (const { agent, warnings } of reports)
    for (const w of warnings ?? []) warnAbout(s.paths.reports, agent, w);
  return reports;
}

/** A report read with a repair (an unexpanded `$(date …)` timestamp): said on stderr, naming file and field. */
function warnAbout(reportsDir: string, agent: string, warning: LocatedProblem): void {
  const file = join(reportsDir, `${agent}.json`);
  process.stderr.write(`acp: warning: ${formatLocated(warning.detail, { ...warning, file })}\n`);
}

/** Every problem of a rejected report, one per line; with --json, also as a list on stdout. */
function everyProblem(err: CoordinationError, json: boolean | undefined): CliError {
  const lines = err.problems.map((p) => formatLocated(p.detail, p));
  const stdout = json
    ? `${JSON.stringify({ error: err.kind, message: err.message, problems: err.problems }, null, 2)}\n`
    : undefined;
  return new CliError(lines.join("\nacp: "), 1, stdout);
}

/** `acp session artifact …`: shared data artifacts. */
export function registerArtifact(session: Command): void {
  const artifact = session.command("artifact").description("shared data artifacts (data/NAME.json)");
  leaf(
    artifact,
    "put",
    "write an artifact (JSON from FILE or stdin); with --from, announce it as a data event",
  )
    .argument("<name>", "NAME, NAME.json or data/NAME.json")
    .argument("[file]", "artifact JSON (default: stdin)")
    .option("--from <agent>", "the agent creating it (logs a `data` event)")
    .option("--description <text>", "what it holds (for the data event)")
    .action(
      async (ref: string, file: string | undefined, o: Common & { from?: string; description?: string }) => {
        const s = await open(o);
        const { parseJsonText } = await import("../../coordination/validate.js");
        const { text, name } = await readInput(file);
        const written = await s.putArtifact(ref, parseJsonText(text, name), o);
        if (o.json) printJson({ artifact: written });
        else printLine(written);
      },
    );
  leaf(artifact, "get", "print an artifact")
    .argument("<name>")
    .action(async (ref: string, o: Common) => printJson(await (await open(o)).getArtifact(ref)));
  leaf(artifact, "list", "artifacts with size and the agents that announced them").action(
    async (o: Common) => {
      const artifacts = await (await open(o)).listArtifacts();
      const { formatArtifacts } = await import("../../coordination/format.js");
      if (o.json) printJson(artifacts);
      else printLine(formatArtifacts(artifacts));
    },
  );
}
