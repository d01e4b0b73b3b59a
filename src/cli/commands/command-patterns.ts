import {
  aggregators,
  isSuccessful,
  type Outcome,
  type PatternStatus,
  type PipelineResult,
} from "../../orchestration/index.js";
import { loadBroadcastJob, loadPipelineJob, loadScatterJob } from "../../orchestration/jobs.js";
import { CliError, printJson, printLine } from "../io.js";
import { type CommonFlags, openSession, progress } from "./command-session.js";

/** `acp command broadcast | scatter | pipeline FILE`: per-agent outcomes, exit 0 / 2 partial / 1. */
export async function runPattern(
  pattern: "broadcast" | "scatter" | "pipeline",
  file: string,
  flags: CommonFlags,
): Promise<void> {
  const job =
    pattern === "broadcast"
      ? { kind: pattern, spec: await loadBroadcastJob(file) }
      : pattern === "scatter"
        ? { kind: pattern, spec: await loadScatterJob(file) }
        : { kind: pattern, spec: await loadPipelineJob(file) };
  const targets =
    job.kind === "broadcast"
      ? job.spec.targets
      : job.kind === "scatter"
        ? job.spec.drafts.map((d) => d.to)
        : job.spec.steps.map((s) => s.to);
  const session = await openSession(flags, targets);
  let done = 0;
  const onOutcome = (outcome: Outcome) => {
    done++;
    progress(`[${done}/${targets.length}] ${outcome.agent}: ${outcome.response.status}`);
  };
  const common = { signal: session.signal, onApproval: session.onApproval, onOutcome };
  try {
    let status: PatternStatus;
    let outcomes: Outcome[];
    let extra: Record<string, unknown> = {};
    let notRun: NotRun = [];
    if (job.kind === "broadcast") {
      const { targets: to, ...base } = job.spec;
      progress(`broadcasting ${base.action} to ${to.length} agents…`);
      const result = await session.orch.broadcast(base, to, common);
      ({ status, outcomes } = result);
      extra = { succeeded: result.succeeded, failed: result.failed };
    } else if (job.kind === "scatter") {
      const spec = job.spec;
      progress(`scattering ${spec.drafts.length} commands…`);
      const result = await session.orch.scatterGather(spec.drafts, {
        ...common,
        aggregate: aggregators[spec.aggregate],
        ...(spec.min_success !== undefined ? { minSuccess: spec.min_success } : {}),
        ...(spec.deadline_ms !== undefined ? { deadlineMs: spec.deadline_ms } : {}),
      });
      ({ status, outcomes } = result);
      extra = { result: result.result, ...(result.error ? { error: result.error } : {}) };
    } else {
      progress(`running a pipeline of ${job.spec.steps.length} steps…`);
      const result = await session.orch.pipeline(job.spec.steps, {
        ...common,
        continueOnFailure: job.spec.continue_on_failure,
      });
      ({ status, outcomes } = result);
      extra = {
        data: result.data,
        ...(result.failedStep !== undefined ? { failedStep: result.failedStep, notRun: result.notRun } : {}),
      };
      notRun = result.notRun;
    }
    if (flags.json) printJson({ status, ...extra, outcomes });
    else printOutcomes(status, outcomes, extra, notRun);
    if (status !== "success") {
      throw new CliError(
        flags.json ? "" : `${pattern} ${status}: ${tally(outcomes, notRun)}`,
        status === "partial" ? 2 : 1,
      );
    }
  } finally {
    await session.close();
  }
}

type NotRun = PipelineResult["notRun"];

/** `1 of 3 succeeded, 1 not run (step 3: agent-3 VALIDATE)`. */
function tally(outcomes: Outcome[], notRun: NotRun): string {
  const good = outcomes.filter((o) => isSuccessful(o.response)).length;
  const steps = notRun.map((n) => `step ${n.index + 1}${n.agent ? `: ${n.agent} ${n.action}` : ""}`);
  const skipped = notRun.length > 0 ? `, ${notRun.length} not run (${steps.join(", ")})` : "";
  return `${good} of ${outcomes.length + notRun.length} succeeded${skipped}`;
}

function printOutcomes(
  status: PatternStatus,
  outcomes: Outcome[],
  extra: Record<string, unknown>,
  notRun: NotRun,
): void {
  const width = Math.max(
    5,
    ...outcomes.map((o) => o.agent.length),
    ...notRun.map((n) => n.agent?.length ?? 0),
  );
  for (const { agent, response } of outcomes) {
    // A cancellation's summary starts "cancelled: ", which the status column already says.
    const detail = response.error
      ? `${response.error.code}: ${response.error.message}`
      : (response.results.summary ?? "").replace(/^cancelled: /, "");
    const ms = response.execution?.totalDuration ?? response.execution?.duration ?? 0;
    printLine(`${agent.padEnd(width)}  ${response.status.padEnd(9)} ${String(ms).padStart(6)} ms  ${detail}`);
  }
  for (const step of notRun) {
    printLine(
      `${(step.agent ?? `step ${step.index + 1}`).padEnd(width)}  not run   ${"".padStart(6)}     ${step.action ?? ""}`.trimEnd(),
    );
  }
  printLine(`${status}: ${tally(outcomes, notRun)}`);
  if (extra.error) printLine(String(extra.error));
  if (extra.result !== undefined) {
    printLine("result:");
    printJson(extra.result);
  }
  if (extra.data !== undefined) {
    printLine("data:");
    printJson(extra.data);
  }
}
