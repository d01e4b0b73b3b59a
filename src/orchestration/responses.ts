import { randomUUID } from "node:crypto";
import type { Problem } from "../protocol/index.js";
import type { Classified, FailureReason } from "./errors.js";
import {
  type AgentCommand,
  type AgentResponse,
  type Artifact,
  COMMAND_VERSION,
  type ErrorCategory,
  type Status,
} from "./schemas.js";

/** What a command handler returns; the orchestrator (or `serveCommands`) wraps it into an AgentResponse. */
export interface CommandResult {
  /** Default `success`; `partial` when only part of the work was done (still counts as success). */
  status?: "success" | "partial";
  data?: unknown;
  artifacts?: Artifact[];
  summary?: string;
  tokensUsed?: number;
}

/** Detail the orchestrator attaches to a failure it decided itself, in `results.data`. */
export interface FailureDetail {
  reason: FailureReason;
  problems?: Problem[];
  [key: string]: unknown;
}

interface Base {
  commandId: string;
  from: string;
  durationMs: number;
}

/** The base of a response the orchestrator `self` gives about `command`, timed from `started`. */
export function baseOf(self: string, command: { id: string }, started: number): Base {
  return { commandId: command.id, from: self, durationMs: performance.now() - started };
}

function envelope(base: Base, status: Status): Omit<AgentResponse, "results"> {
  return {
    id: randomUUID(),
    commandId: base.commandId,
    timestamp: new Date().toISOString(),
    version: COMMAND_VERSION,
    from: base.from,
    status,
    execution: { duration: Math.max(0, Math.round(base.durationMs)) },
  };
}

export function successResponse(base: Base, result: CommandResult): AgentResponse {
  const response: AgentResponse = {
    ...envelope(base, result.status ?? "success"),
    results: {
      ...(result.data !== undefined ? { data: result.data } : {}),
      ...(result.artifacts ? { artifacts: result.artifacts } : {}),
      ...(result.summary !== undefined ? { summary: result.summary } : {}),
    },
  };
  if (result.tokensUsed !== undefined && response.execution)
    response.execution.tokensUsed = result.tokensUsed;
  return response;
}

export function failureResponse(
  base: Base,
  failure: { category: ErrorCategory; message: string; recoverable: boolean; reason: FailureReason },
  extra: Omit<FailureDetail, "reason"> = {},
  status: "failed" | "timeout" = failure.category === "timeout_error" ? "timeout" : "failed",
): AgentResponse {
  return {
    ...envelope(base, status),
    results: { summary: failure.message, data: { reason: failure.reason, ...extra } },
    error: { code: failure.category, message: failure.message, recoverable: failure.recoverable },
  };
}

export function classifiedResponse(base: Base, classified: Classified): AgentResponse {
  return failureResponse(base, classified);
}

/** Cancelled is not an error category: the caller chose to stop, so no `error` member. */
export function cancelledResponse(base: Base, why: string): AgentResponse {
  return { ...envelope(base, "cancelled"), results: { summary: `cancelled: ${why}` } };
}

/** The reason the orchestrator recorded on a failure it decided, if any. */
export function failureReason(response: AgentResponse): FailureReason | undefined {
  const data = response.results.data;
  if (typeof data === "object" && data !== null && "reason" in data) {
    return (data as { reason: FailureReason }).reason;
  }
  return undefined;
}

/** A copy of a cached response, re-addressed to the command now asking. */
export function reissue(cached: AgentResponse, command: AgentCommand): AgentResponse {
  return {
    ...cached,
    id: randomUUID(),
    commandId: command.id,
    timestamp: new Date().toISOString(),
    execution: { ...cached.execution, duration: 0 },
  };
}
