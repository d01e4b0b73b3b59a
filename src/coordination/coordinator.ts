/**
 * `acp session run`: launches every agent whose dependencies are complete (up to maxParallel at a
 * time), records each transition in coordination.json and the event log, and applies the coordination
 * protocol's recovery strategies: retry N times, continue without a non-critical agent, stop on a
 * critical one, and point at the partial results a failed agent left in its report.
 */

import { applyAgentPatch } from "./agent-patch.js";
import { type AgentProcessExit, runAgentProcess } from "./agent-process.js";
import { reportRef } from "./paths.js";
import type { Plan, PlannedAgent } from "./plan.js";
import type { AgentStatus, Report } from "./schemas.js";
import type { Session } from "./session.js";

/** The name the coordinator uses in the event log. */
export const COORDINATOR_NAME = "coordinator";
export const DEFAULT_MAX_PARALLEL = 4;

export interface Transition {
  agent: string;
  status: AgentStatus;
  attempt: number;
  maxAttempts: number;
  /** Why: "exited with code 3", "retrying", "not started: critical agent x failed"… */
  detail?: string;
  elapsedMs: number;
}

export interface AgentOutcome {
  name: string;
  status: "completed" | "failed" | "not_started";
  critical: boolean;
  attempts: number;
  error?: string;
  exitCode?: number | null;
  signal?: string;
  stderrTail?: string;
  /** The report of an agent that failed, or whose report says `partial`: results to recover. */
  partialReport?: PartialReport;
}

/** Where an agent's partial results are (recovery strategy 4: check for a partial report). */
export interface PartialReport {
  path: string;
  status: Report["status"];
  summary: string;
}

export interface RunResult {
  sessionId: string;
  /** False when a critical agent failed or the run was interrupted. */
  ok: boolean;
  /** The critical agent whose failure stopped the run, or "interrupted". */
  stoppedBy?: string;
  agents: AgentOutcome[];
}

export interface RunOptions {
  maxParallel?: number;
  /** Aborting stops every running agent (SIGTERM, then SIGKILL) and launches no more. */
  signal?: AbortSignal;
  onTransition?: (transition: Transition) => void;
  /** Base environment for agents (default process.env); the session variables are added to it. */
  env?: NodeJS.ProcessEnv;
  killGraceMs?: number;
}

type Phase = "waiting" | "running" | "completed" | "failed";

/**
 * Runs a plan's agents as processes in `session`, each once its dependencies completed and at most
 * `maxParallel` at a time, retrying as the plan says; agents a resumed session already completed are not run
 * again. Resolves with every agent's outcome once nothing more can run.
 */
export async function runPlan(plan: Plan, session: Session, options: RunOptions = {}): Promise<RunResult> {
  const started = Date.now();
  const maxParallel = options.maxParallel ?? plan.maxParallel ?? DEFAULT_MAX_PARALLEL;
  const byName = new Map(plan.agents.map((agent) => [agent.name, agent]));
  const phase = new Map<string, Phase>();
  const attempts = new Map<string, number>(plan.agents.map((a) => [a.name, 0]));
  const outcomes = new Map<string, AgentOutcome>();
  let stoppedBy: string | undefined;

  const emit = (agent: PlannedAgent, status: AgentStatus, detail?: string): void =>
    options.onTransition?.({
      agent: agent.name,
      status,
      attempt: attempts.get(agent.name) ?? 0,
      maxAttempts: agent.retries + 1,
      ...(detail !== undefined && { detail }),
      elapsedMs: Date.now() - started,
    });

  // Register every agent; on a resumed session, agents already completed are not run again.
  const now = new Date().toISOString();
  const registered = await session.update((c) => {
    for (const agent of plan.agents) {
      if (c.agents[agent.name]?.status === "completed") continue;
      c.agents[agent.name] = applyAgentPatch(
        c.agents[agent.name],
        agent.name,
        {
          status: "waiting",
          dependencies: agent.dependsOn,
          reason: agent.dependsOn.length > 0 ? `waiting for ${agent.dependsOn.join(", ")}` : "ready to start",
        },
        now,
      );
    }
  });
  for (const agent of plan.agents) {
    const done = registered.agents[agent.name]?.status === "completed";
    phase.set(agent.name, done ? "completed" : "waiting");
    if (done)
      outcomes.set(agent.name, {
        name: agent.name,
        status: "completed",
        critical: agent.critical,
        attempts: 0,
      });
    emit(agent, done ? "completed" : "waiting", done ? "already completed in this session" : undefined);
  }
  await session.log({ from: COORDINATOR_NAME, type: "status", message: `run of ${plan.file} started` });

  const ready = (agent: PlannedAgent): boolean =>
    phase.get(agent.name) === "waiting" &&
    agent.dependsOn.every((d) => {
      const p = phase.get(d);
      return p === "completed" || (p === "failed" && !byName.get(d)!.critical);
    });

  const attempt = async (agent: PlannedAgent): Promise<void> => {
    const n = attempts.get(agent.name)! + 1;
    attempts.set(agent.name, n);
    const of = agent.retries + 1;
    await session.updateAgent(agent.name, {
      status: "in_progress",
      attempts: n,
      progress: `attempt ${n} of ${of}`,
    });
    emit(agent, "in_progress", `attempt ${n} of ${of}`);
    await session.log({
      from: COORDINATOR_NAME,
      type: "status",
      message: `launching ${agent.name} (attempt ${n} of ${of})`,
    });
    const exit = await runAgentProcess({
      name: agent.name,
      command: agent.command,
      cwd: agent.cwd,
      env: agentEnvironment(options.env ?? process.env, agent, session, n),
      attempt: n,
      logDir: session.paths.logs,
      killGraceMs: options.killGraceMs ?? 5000,
      ...(agent.timeoutMs !== undefined && { timeoutMs: agent.timeoutMs }),
      ...(options.signal !== undefined && { signal: options.signal }),
    });
    const reported = (await session.readCoordination()).agents[agent.name];
    const failure = describeFailure(exit, reported?.status, reported?.error, agent.timeoutMs);
    if (failure === undefined) {
      if (reported?.status !== "completed") await session.updateAgent(agent.name, { status: "completed" });
      phase.set(agent.name, "completed");
      const partial = await partialReportOf(session, agent.name, false);
      outcomes.set(agent.name, {
        name: agent.name,
        status: "completed",
        critical: agent.critical,
        attempts: n,
        ...(partial && { partialReport: partial }),
      });
      emit(agent, "completed", partial && `partial results in ${partial.path}`);
      await session.log({ from: COORDINATOR_NAME, type: "status", message: `${agent.name} completed` });
      return;
    }
    const record = {
      error: failure,
      exit_code: exit.exitCode,
      ...(exit.signal !== null && { signal: exit.signal }),
      ...(exit.stderrTail !== "" && { stderr_tail: exit.stderrTail }),
    };
    await session.log({
      from: COORDINATOR_NAME,
      type: "error",
      message: `${agent.name} failed on attempt ${n} of ${of}: ${failure}`,
      ...(exit.stderrTail !== "" && { error: exit.stderrTail }),
    });
    if (n < of && stoppedBy === undefined && !exit.interrupted) {
      await session.updateAgent(agent.name, {
        status: "waiting",
        reason: `retrying after: ${failure}`,
        ...record,
      });
      phase.set(agent.name, "waiting");
      emit(agent, "waiting", `retrying after: ${failure}`);
      return;
    }
    await session.updateAgent(agent.name, { status: "failed", ...record });
    phase.set(agent.name, "failed");
    const partial = await partialReportOf(session, agent.name, true);
    outcomes.set(agent.name, {
      name: agent.name,
      status: "failed",
      critical: agent.critical,
      attempts: n,
      error: failure,
      exitCode: exit.exitCode,
      ...(exit.signal !== null && { signal: exit.signal }),
      stderrTail: exit.stderrTail,
      ...(partial && { partialReport: partial }),
    });
    emit(agent, "failed", partial ? `${failure}; partial results in ${partial.path}` : failure);
    if (exit.interrupted) stoppedBy ??= "interrupted";
    else if (agent.critical && stoppedBy === undefined) {
      stoppedBy = agent.name;
      await session.log({
        from: COORDINATOR_NAME,
        type: "error",
        message: `stopping: critical agent ${agent.name} failed; no further agents will be started`,
      });
    }
  };

  const running = new Map<string, Promise<void>>();
  for (;;) {
    if (options.signal?.aborted) stoppedBy ??= "interrupted";
    if (stoppedBy === undefined) {
      for (const name of plan.order) {
        const agent = byName.get(name)!;
        if (running.size >= maxParallel) break;
        if (!ready(agent)) continue;
        phase.set(name, "running");
        running.set(
          name,
          attempt(agent).finally(() => running.delete(name)),
        );
      }
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  // Whatever is still waiting was never started: say why in coordination.json.
  for (const agent of plan.agents) {
    if (phase.get(agent.name) !== "waiting") continue;
    const reason =
      stoppedBy === "interrupted"
        ? "not started: the run was interrupted"
        : stoppedBy !== undefined
          ? `not started: critical agent ${stoppedBy} failed`
          : `not started: dependencies failed (${agent.dependsOn.filter((d) => phase.get(d) === "failed").join(", ")})`;
    await session.updateAgent(agent.name, { reason });
    outcomes.set(agent.name, {
      name: agent.name,
      status: "not_started",
      critical: agent.critical,
      attempts: attempts.get(agent.name) ?? 0,
    });
    emit(agent, "waiting", reason);
  }

  const agents = plan.agents.map((a) => outcomes.get(a.name)!);
  const count = (s: AgentOutcome["status"]) => agents.filter((a) => a.status === s).length;
  const summary = `${count("completed")} completed, ${count("failed")} failed, ${count("not_started")} not started`;
  const ok = stoppedBy === undefined;
  await session.log(
    ok
      ? { from: COORDINATOR_NAME, type: "completed", message: `run finished: ${summary}` }
      : { from: COORDINATOR_NAME, type: "error", message: `run stopped (${stoppedBy}): ${summary}` },
  );
  return { sessionId: session.id, ok, ...(stoppedBy !== undefined && { stoppedBy }), agents };
}

/**
 * A failed agent's report (whatever its status: it is all that is left of its work), or a
 * completed agent's report that says `partial`; undefined when there is none or it does not read.
 */
export async function partialReportOf(
  session: Session,
  agent: string,
  failed: boolean,
): Promise<PartialReport | undefined> {
  const report = await session.reportIfAny(agent);
  if (report === undefined || (!failed && report.status !== "partial")) return undefined;
  return { path: reportRef(agent), status: report.status, summary: report.summary };
}

/** The failure of an attempt in words, or undefined when it succeeded. */
export function describeFailure(
  exit: AgentProcessExit,
  reportedStatus: AgentStatus | undefined,
  reportedError: string | undefined,
  timeoutMs: number | undefined,
): string | undefined {
  const own =
    reportedStatus === "failed" && reportedError !== undefined ? `; agent reported: ${reportedError}` : "";
  if (exit.spawnError !== undefined) return `could not start: ${exit.spawnError}`;
  if (exit.interrupted) return "interrupted";
  if (exit.timedOut) return `timed out after ${(timeoutMs ?? 0) / 1000}s`;
  if (exit.signal !== null) return `killed by ${exit.signal}${own}`;
  if (exit.exitCode !== 0) return `exited with code ${exit.exitCode}${own}`;
  if (reportedStatus === "failed") return `agent reported failure: ${reportedError ?? "no error given"}`;
  return undefined;
}

/** What an agent finds in its environment: the session to coordinate through and who it is. */
function agentEnvironment(
  base: NodeJS.ProcessEnv,
  agent: PlannedAgent,
  session: Session,
  attempt: number,
): NodeJS.ProcessEnv {
  return {
    ...base,
    ...agent.env,
    ACP_SESSION_ID: session.id,
    CLAUDE_SESSION_ID: session.id,
    ACP_CONTEXT_DIR: session.root,
    ACP_AGENT_NAME: agent.name,
    ACP_ATTEMPT: String(attempt),
  };
}
