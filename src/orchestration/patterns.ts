import { setMaxListeners } from "node:events";
import { TimeoutAbort } from "./errors.js";
import type { CommandSendOptions, Orchestrator } from "./orchestrator.js";
import { type AgentCommand, type AgentResponse, type CommandDraft, isSuccessful } from "./schemas.js";

/** One command of a multi-agent pattern and how it ended, in the order the commands were given. */
export interface Outcome {
  agent: string;
  command: AgentCommand;
  response: AgentResponse;
}

/** Options every multi-agent pattern takes. */
export interface PatternOptions extends Pick<CommandSendOptions, "signal" | "onApproval"> {
  /** Called as each command ends (progress for long runs). */
  onOutcome?: (outcome: Outcome) => void;
}

/** success: every command succeeded; partial: some did (at least `minSuccess` for scatter-gather); failed: otherwise. */
export type PatternStatus = "success" | "partial" | "failed";

export interface BroadcastResult {
  status: PatternStatus;
  outcomes: Outcome[];
  succeeded: string[];
  failed: string[];
}

/** A step given as data: its `parameters` get the previous step's `results.data` under `input` (default "input"). */
export interface PipelineTemplate extends CommandDraft {
  input?: string;
}

/** A step given as a function of the previous step's response (undefined for the first step). */
export type PipelineStep =
  | PipelineTemplate
  | ((previous: AgentResponse | undefined, index: number) => CommandDraft);

export interface PipelineOptions extends PatternOptions {
  /** Go on after a failed step (the next step gets the failed response as `previous`). Default false. */
  continueOnFailure?: boolean;
}

export interface PipelineResult {
  status: PatternStatus;
  outcomes: Outcome[];
  /** `results.data` of the last step that ran successfully. */
  data: unknown;
  /** Index of the step that stopped the pipeline. */
  failedStep?: number;
  /** The steps after it, which never ran (a step given as a function has no agent or action yet). */
  notRun: { index: number; agent?: string; action?: string }[];
}

export interface ScatterGatherOptions<T> extends PatternOptions {
  /** Combines the successful responses (in command order); `all` has every outcome. */
  aggregate: (successes: Outcome[], all: Outcome[]) => T;
  /** Successes needed for a result; default: all commands. */
  minSuccess?: number;
  /** After this many ms the gather ends; commands without an answer are reported as `timeout`. */
  deadlineMs?: number;
}

export interface ScatterGatherResult<T> {
  status: PatternStatus;
  outcomes: Outcome[];
  succeeded: number;
  /** The aggregate, when at least `minSuccess` commands succeeded. */
  result?: T;
  /** Why there is no result. */
  error?: string;
}

function statusOf(outcomes: Outcome[], enough: number): PatternStatus {
  const good = outcomes.filter((o) => isSuccessful(o.response)).length;
  if (good === outcomes.length && good > 0) return "success";
  return good >= enough && good > 0 ? "partial" : "failed";
}

/** One-to-many: the same command (a fresh id each) to every target, in parallel. */
export async function broadcast(
  orchestrator: Orchestrator,
  base: Omit<CommandDraft, "to">,
  targets: string[],
  options: CommandSendOptions & PatternOptions,
): Promise<BroadcastResult> {
  const unique = [...new Set(targets)];
  const { onOutcome, ...sendOptions } = options;
  const linked = linkedSignal(options.signal);
  const outcomes = await Promise.all(
    unique.map(async (agent) => {
      const command = orchestrator.command({ ...base, to: agent });
      const response = await orchestrator.send(command, { ...sendOptions, signal: linked.signal });
      return reported({ agent, command, response }, onOutcome);
    }),
  ).finally(linked.unlink);
  return {
    status: statusOf(outcomes, 1),
    outcomes,
    succeeded: outcomes.filter((o) => isSuccessful(o.response)).map((o) => o.agent),
    failed: outcomes.filter((o) => !isSuccessful(o.response)).map((o) => o.agent),
  };
}

/**
 * Sequential: each step's command carries the previous step's data and, as `correlationId`, the
 * previous command's id (as in the command layer's example), unless the step sets its own.
 */
export async function pipeline(
  orchestrator: Orchestrator,
  steps: PipelineStep[],
  options: PipelineOptions,
): Promise<PipelineResult> {
  const outcomes: Outcome[] = [];
  let previous: AgentResponse | undefined;
  let data: unknown;
  for (const [index, step] of steps.entries()) {
    const draft = typeof step === "function" ? step(previous, index) : fromTemplate(step, previous);
    const correlationId = draft.context?.correlationId ?? previous?.commandId;
    const command = orchestrator.command({
      ...draft,
      ...(correlationId !== undefined ? { context: { ...draft.context, correlationId } } : {}),
    });
    const response = await orchestrator.send(command, sendOptionsOf(options));
    outcomes.push(reported({ agent: command.to, command, response }, options.onOutcome));
    if (isSuccessful(response)) data = response.results.data;
    else if (!options.continueOnFailure || response.status === "cancelled") {
      const notRun = steps.slice(index + 1).map((later, offset) => ({
        index: index + 1 + offset,
        ...(typeof later === "function" ? {} : { agent: later.to, action: later.action }),
      }));
      return { status: "failed", outcomes, data, failedStep: index, notRun };
    }
    previous = response;
  }
  return { status: statusOf(outcomes, 1), outcomes, data, notRun: [] };
}

/**
 * A signal of our own that follows the caller's: every command of a pattern listens on it (more than
 * Node's default of 10 listeners), and a scatter-gather aborts it at its deadline.
 */
function linkedSignal(parent: AbortSignal | undefined) {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  const forward = () => controller.abort(parent?.reason);
  parent?.addEventListener("abort", forward, { once: true });
  if (parent?.aborted) forward();
  return {
    controller,
    signal: controller.signal,
    unlink: () => parent?.removeEventListener("abort", forward),
  };
}

function reported(outcome: Outcome, onOutcome: PatternOptions["onOutcome"]): Outcome {
  onOutcome?.(outcome);
  return outcome;
}

function sendOptionsOf(options: PatternOptions): CommandSendOptions {
  return {
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onApproval ? { onApproval: options.onApproval } : {}),
  };
}

function fromTemplate(step: PipelineTemplate, previous: AgentResponse | undefined): CommandDraft {
  const { input, ...draft } = step;
  const passed = previous?.results.data;
  if (passed === undefined) return draft;
  return { ...draft, parameters: { ...draft.parameters, [input ?? "input"]: passed } };
}

/**
 * Parallel with aggregation. Ends when every command answered or at the deadline, whichever is
 * first; at the deadline the commands still out are aborted and reported as `timeout` (reason
 * `deadline`), so a late answer never changes a result already given.
 */
export async function scatterGather<T>(
  orchestrator: Orchestrator,
  drafts: CommandDraft[],
  options: ScatterGatherOptions<T>,
): Promise<ScatterGatherResult<T>> {
  const minSuccess = options.minSuccess ?? drafts.length;
  if (!Number.isInteger(minSuccess) || minSuccess < 0 || minSuccess > drafts.length) {
    throw new RangeError(`minSuccess must be a whole number from 0 to ${drafts.length}, got ${minSuccess}`);
  }
  const linked = linkedSignal(options.signal);
  const controller = linked.controller;
  const deadline = options.deadlineMs;
  const timer =
    deadline === undefined
      ? undefined
      : setTimeout(
          () =>
            controller.abort(
              new TimeoutAbort("deadline", `no answer before the scatter-gather deadline (${deadline} ms)`),
            ),
          deadline,
        );
  try {
    const sendOptions: CommandSendOptions = { ...sendOptionsOf(options), signal: controller.signal };
    const outcomes = await Promise.all(
      drafts.map(async (draft) => {
        const command = orchestrator.command(draft);
        const response = await orchestrator.send(command, sendOptions);
        return reported({ agent: command.to, command, response }, options.onOutcome);
      }),
    );
    const successes = outcomes.filter((o) => isSuccessful(o.response));
    const status = statusOf(outcomes, Math.max(1, minSuccess));
    if (successes.length < minSuccess) {
      return {
        status: "failed",
        outcomes,
        succeeded: successes.length,
        error: `only ${successes.length} of ${outcomes.length} succeeded; ${minSuccess} needed`,
      };
    }
    return { status, outcomes, succeeded: successes.length, result: options.aggregate(successes, outcomes) };
  } finally {
    clearTimeout(timer);
    linked.unlink();
  }
}
