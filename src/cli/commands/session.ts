import { type Command, InvalidArgumentError, Option } from "commander";
import type { CountKey, EventFilter, LogProblem } from "../../coordination/index.js";
import { AGENT_STATUSES, EVENT_TYPES } from "../../coordination/vocabulary.js";
import { CliError, printJson, printLine } from "../io.js";
import { wholeNumber } from "../option-parsers.js";
import { registerArtifact, registerReport } from "./session-files.js";
import { type Common, open, SESSION_LOG, SESSION_UPDATE } from "./session-log-update.js";
import { coordination, leaf, registerLeaf, severityOption, suffixOption } from "./session-shared.js";

export function registerSession(program: Command): void {
  const session = program
    .command("session")
    .description(
      "coordinate parallel agents through a shared session directory (coordination.json, events, reports, data)",
    );

  leaf(session, "init", "create a session; prints its id", "id for the new session (default: a new UUID)")
    .option("--project-type <type>", "recorded as project_type")
    .option("--project-path <path>", "recorded as project_path")
    .option("--export", "print `export ACP_SESSION_ID=… CLAUDE_SESSION_ID=…` for eval in a shell")
    .action(async (o: Common & { projectType?: string; projectPath?: string; export?: boolean }) => {
      const { Session } = await import("../../coordination/session.js");
      const s = await Session.create({
        root: o.root,
        id: o.session,
        projectType: o.projectType,
        projectPath: o.projectPath,
      });
      if (o.json) printJson({ session_id: s.id, root: s.root, dir: s.paths.dir });
      else if (o.export) {
        const id = shellQuote(s.id);
        const root = o.root ? ` ACP_CONTEXT_DIR=${shellQuote(s.root)}` : "";
        printLine(`export ACP_SESSION_ID=${id} CLAUDE_SESSION_ID=${id}${root}`);
      } else printLine(s.id);
    });

  leaf(session, "status", "all agents (or one), from coordination.json")
    .argument("[agent]", "one agent")
    .addOption(new Option("--status <status>", "only agents in this status").choices(AGENT_STATUSES))
    .option("--watch", "redraw whenever coordination.json changes (Ctrl-C to stop)")
    .action(async (agent: string | undefined, o: Common & { status?: string; watch?: boolean }) => {
      const s = await open(o);
      const { formatAgent, formatAgentTable } = await import("../../coordination/format.js");
      const show = async () => {
        const agents = Object.entries((await s.readCoordination()).agents).filter(
          ([name, e]) =>
            (agent === undefined || name === agent) && (o.status === undefined || e.status === o.status),
        );
        if (agent !== undefined && agents.length === 0 && o.status === undefined) await s.agent(agent);
        if (o.json) printJson(agent !== undefined ? (agents[0]?.[1] ?? null) : Object.fromEntries(agents));
        else if (agent !== undefined)
          printLine(agents[0] ? formatAgent(agent, agents[0][1]) : `${agent}: not ${o.status}`);
        else printLine(formatAgentTable(Object.fromEntries(agents)));
      };
      if (!o.watch) return show();
      const stop = interruption();
      const redraw = async () => {
        if (process.stdout.isTTY) process.stdout.write("\x1b[H\x1b[2J");
        else printLine(`--- ${new Date().toISOString()}`);
        await show();
      };
      const watcher = s.watch((changes) => void (changes.includes("coordination") && redraw()));
      await watcher.ready;
      await redraw();
      await new Promise((resolve) => stop.signal.addEventListener("abort", resolve));
      watcher.close();
    });

  registerLeaf(session, SESSION_UPDATE);
  registerLeaf(session, SESSION_LOG);

  addEventFilters(leaf(session, "events", "the event log, filtered; --follow keeps printing new events"))
    .option(
      "--follow",
      "keep printing new events as they are appended (Ctrl-C to stop); --json prints one per line",
    )
    .action(async (o: Common & EventFilter & { follow?: boolean }) => {
      const s = await open(o);
      const { formatEvent } = await import("../../coordination/format.js");
      const filter = eventFilter(o);
      if (o.follow) {
        const stop = interruption();
        await s.follow((e) => printLine(o.json ? JSON.stringify(e.event) : formatEvent(e)), {
          filter,
          signal: stop.signal,
          onProblem: (p) => process.stderr.write(`acp: ${p.message}\n`),
        });
        return;
      }
      const { events, problems } = await s.readEvents(filter);
      if (o.json) printJson(events.map((e) => e.event));
      else for (const e of events) printLine(formatEvent(e));
      reportProblems(problems);
    });

  addEventFilters(leaf(session, "timeline", "events in time order: `time [agent] type: message`")).action(
    async (o: Common & EventFilter) => {
      const { events, problems } = await (await open(o)).readEvents(eventFilter(o));
      const { timeline, timelineLine } = await import("../../coordination/queries.js");
      const ordered = timeline(events);
      if (o.json) printJson(ordered.map((e) => e.event));
      else for (const e of ordered) printLine(timelineLine(e.event));
      reportProblems(problems);
    },
  );

  leaf(session, "counts", "how many events of each type (or sender, or severity)")
    .addOption(new Option("--by <field>", "group by").choices(["type", "from", "severity"]).default("type"))
    .action(async (o: Common & { by: CountKey }) => {
      const { events, problems } = await (await open(o)).readEvents();
      const { countEvents } = await import("../../coordination/queries.js");
      const counts = countEvents(
        events.map((e) => e.event),
        o.by,
      );
      if (o.json) printJson(counts.map(({ key, count }) => ({ [o.by]: key, count })));
      else for (const { key, count } of counts) printLine(`${key.padEnd(12)} ${count}`);
      reportProblems(problems);
    });

  registerReport(session);
  registerArtifact(session);

  leaf(session, "wait", "block until the agents complete; exit 1 naming any that failed, 124 on --timeout")
    .argument("[agents...]", "agents to wait for")
    .addOption(suffixOption())
    .option("--timeout <seconds>", "give up after this long", positiveNumber)
    .action(async (agents: string[], o: Common & { suffix?: string; timeout?: number }) => {
      if (agents.length === 0 && o.suffix === undefined)
        throw new CliError("name at least one agent, or give --suffix");
      const stop = interruption();
      const { formatWaited } = await import("../../coordination/format.js");
      const result = await (await open(o)).waitFor(
        { agents, ...(o.suffix !== undefined && { suffix: o.suffix }) },
        {
          signal: stop.signal,
          ...(o.timeout !== undefined && { timeoutMs: o.timeout * 1000 }),
          onProgress: (states) => process.stderr.write(`waiting: ${formatWaited(states)}\n`),
        },
      );
      if (o.json) printJson(result);
      const names = (status: string) => result.agents.filter((a) => a.status === status).map((a) => a.name);
      if (result.outcome === "completed") {
        if (!o.json) printLine(`completed: ${names("completed").join(", ")}`);
        return;
      }
      if (result.outcome === "failed") {
        const failed = result.agents
          .filter((a) => a.status === "failed")
          .map((a) => `${a.name} (${a.error ?? "no error given"})`);
        throw new CliError(`failed: ${failed.join(", ")}`, 1);
      }
      const pending = result.agents.filter((a) => a.status !== "completed").map((a) => a.name);
      const why = result.outcome === "timeout" ? `timed out after ${o.timeout}s` : "interrupted";
      throw new CliError(
        `${why}; still waiting for: ${pending.join(", ") || `any agent ending in "${o.suffix}"`}`,
        result.outcome === "timeout" ? 124 : 130,
      );
    });

  leaf(
    session,
    "failed",
    "agents that failed (error, exit code, stderr tail) and any partial results their reports hold",
  ).action(async (o: Common) => {
    const s = await open(o);
    const { formatAgent } = await import("../../coordination/format.js");
    const { partialReportOf } = await import("../../coordination/coordinator.js");
    const agents = Object.entries((await s.readCoordination()).agents);
    const failed = await Promise.all(
      agents
        .filter(([, e]) => e.status === "failed")
        .map(async ([name, entry]) => ({ name, entry, report: await partialReportOf(s, name, true) })),
    );
    // Recovery strategy 4: an agent that did not fail may still say its results are partial.
    const partial = (
      await Promise.all(
        agents
          .filter(([, e]) => e.status !== "failed")
          .map(async ([name, entry]) => ({ name, entry, report: await partialReportOf(s, name, false) })),
      )
    ).filter((a) => a.report !== undefined);
    if (o.json) {
      printJson(
        [...failed, ...partial].map(({ name, entry, report }) => ({
          name,
          ...entry,
          ...(report && { partial_report: report }),
        })),
      );
      return;
    }
    const lines = [...failed, ...partial].map(
      ({ name, entry, report }) =>
        formatAgent(name, entry) +
        (report ? `\n  partial results: ${report.path} (${report.status}): ${report.summary}` : ""),
    );
    printLine(lines.length === 0 ? "no failed agents" : lines.join("\n"));
  });

  leaf(
    session,
    "run",
    "run a plan of agents, respecting dependencies; exit 1 if a critical agent failed",
    "resume this session, or create it with this id (default: a new session; $ACP_SESSION_ID is not used)",
  )
    .argument("<plan>", "plan file (YAML)")
    .option(
      "--max-parallel <n>",
      "agents running at once (default: the plan's max_parallel, else 4)",
      wholeNumber(1),
    )
    .action(async (file: string, o: Common & { maxParallel?: number }) => runCommand(file, o));
}

async function runCommand(file: string, o: Common & { maxParallel?: number }): Promise<void> {
  const { loadPlan, runPlanWithProgress, Session } = await coordination();
  const plan = await loadPlan(file);
  const create = {
    root: o.root,
    id: o.session,
    projectType: plan.projectType,
    projectPath: plan.projectPath,
  };
  // Only an explicit --session resumes (or names) a session: a stale ACP_SESSION_ID must not.
  const s = o.session
    ? await Session.open({ root: o.root, id: o.session }).catch(() => Session.create(create))
    : await Session.create(create);
  process.stderr.write(`session ${s.id} (${s.paths.dir})\n`);
  const result = await runPlanWithProgress(plan, s, process.stderr, {
    signal: interruption().signal,
    ...(o.maxParallel !== undefined && { maxParallel: o.maxParallel }),
  });
  if (o.json) printJson(result);
  else {
    for (const a of result.agents) {
      const partial = a.partialReport
        ? `; partial results in ${a.partialReport.path}: ${a.partialReport.summary}`
        : "";
      printLine(`${a.name}: ${a.status}${a.error ? ` (${a.error})` : ""}${partial}`);
    }
    printLine(`session ${s.id}`);
  }
  if (!result.ok) {
    const why =
      result.stoppedBy === "interrupted" ? "interrupted" : `critical agent ${result.stoppedBy} failed`;
    throw new CliError(`run stopped: ${why} (see \`acp session failed --session ${s.id}\`)`, 1);
  }
}

function addEventFilters(command: Command): Command {
  return command
    .option("--from <agent>", "only events from this agent")
    .addOption(new Option("--type <type>", "only events of this type").choices(EVENT_TYPES))
    .addOption(severityOption());
}

function eventFilter(o: EventFilter): EventFilter {
  return {
    ...(o.from !== undefined && { from: o.from }),
    ...(o.type !== undefined && { type: o.type }),
    ...(o.severity !== undefined && { severity: o.severity }),
  };
}

/** Torn lines are warnings (a crash artifact); invalid lines fail the command after printing the rest. */
function reportProblems(problems: readonly LogProblem[]): void {
  for (const p of problems)
    process.stderr.write(`acp: ${p.kind === "torn" ? "warning: " : ""}${p.message}\n`);
  const invalid = problems.filter((p) => p.kind === "invalid").length;
  if (invalid > 0)
    throw new CliError(`${invalid} invalid line${invalid > 1 ? "s" : ""} in messages.jsonl (see above)`);
}

/** An AbortSignal fired by Ctrl-C or SIGTERM, for commands that run until stopped. */
function interruption(): AbortController {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop).once("SIGTERM", stop);
  return controller;
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a positive number");
  return n;
}

function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}
