import { z } from "zod";
import { AgentId, PRIORITIES } from "../protocol/index.js";
import { priorityRank } from "../protocol/priority.js";

/**
 * The wire types of the ACP v2.0 command layer: exactly its `AgentCommand` and `AgentResponse`
 * (plus two optional `execution` fields the orchestrator sets), as zod schemas from which the TypeScript types are inferred. Objects are strict,
 * so a misspelt field (`prority`) is an error naming it rather than silently ignored.
 */

/** The ACP method a command travels as (request: response body = AgentResponse; notification: fire-and-forget). */
export const COMMAND_METHOD = "agent.command";
/** Best-effort notification telling a remote agent that the orchestrator gave up on a command. */
export const COMMAND_CANCEL_METHOD = "agent.command.cancel";
export const COMMAND_VERSION = "2.0";

/** The toolkit's one priority vocabulary (src/protocol/priority.ts): it also ranks a message in its recipient's queue. */
export { PRIORITIES, priorityRank };
export const Priority = z.enum(PRIORITIES);
export type Priority = z.infer<typeof Priority>;

export const STATUSES = ["success", "partial", "failed", "timeout", "cancelled"] as const;
export const Status = z.enum(STATUSES);
export type Status = z.infer<typeof Status>;

export const ACTIONS = [
  "ANALYZE",
  "DESIGN",
  "IMPLEMENT",
  "VALIDATE",
  "OPTIMIZE",
  "REFACTOR",
  "DOCUMENT",
  "TEST",
  "EXECUTE",
] as const;
export const Action = z.enum(ACTIONS);
export type Action = z.infer<typeof Action>;

/** The command layer's error categories; `AgentResponse.error.code` is always one of them. */
export const ErrorCategory = {
  USER_ERROR: "user_error",
  AGENT_ERROR: "agent_error",
  SYSTEM_ERROR: "system_error",
  TIMEOUT_ERROR: "timeout_error",
  PERMISSION_ERROR: "permission_error",
} as const;
export type ErrorCategory = (typeof ErrorCategory)[keyof typeof ErrorCategory];
export const ERROR_CATEGORIES: readonly ErrorCategory[] = Object.values(ErrorCategory);

const Id = z.string().min(1, "must not be empty").max(256, "must be at most 256 characters");
const Timestamp = z.iso.datetime({
  offset: true,
  message: "must be an ISO 8601 date-time with a zone, e.g. 2026-02-14T12:00:00Z",
});
const Milliseconds = z
  .int({ error: "must be a whole number of milliseconds" })
  .nonnegative("must not be negative");

export const RetryPolicy = z.strictObject({
  maxAttempts: z.int({ error: "must be a whole number" }).min(1, "must be at least 1").max(100),
  backoffMs: Milliseconds,
});
export type RetryPolicy = z.infer<typeof RetryPolicy>;

export const Artifact = z.strictObject({
  id: Id,
  type: z.string().min(1, "must not be empty"),
  path: z.string().min(1, "must not be empty"),
  description: z.string(),
});
export type Artifact = z.infer<typeof Artifact>;

export const AgentCommand = z.strictObject({
  id: Id,
  timestamp: Timestamp,
  version: z.literal(COMMAND_VERSION, { error: `must be "${COMMAND_VERSION}"` }),
  from: AgentId,
  to: AgentId,
  priority: Priority,
  action: Action,
  parameters: z.record(z.string(), z.unknown(), { error: "must be an object" }),
  context: z
    .strictObject({
      correlationId: Id.optional(),
      timeout: Milliseconds.min(1, "must be at least 1 ms").optional(),
      retryPolicy: RetryPolicy.optional(),
    })
    .optional(),
  security: z
    .strictObject({
      permissions: z.array(z.string().min(1, "must not be empty")),
      requireApproval: z.boolean().optional(),
    })
    .optional(),
});
export type AgentCommand = z.infer<typeof AgentCommand>;

export const AgentResponse = z.strictObject({
  id: Id,
  commandId: Id,
  timestamp: Timestamp,
  version: z.literal(COMMAND_VERSION, { error: `must be "${COMMAND_VERSION}"` }),
  from: AgentId,
  status: Status,
  results: z.strictObject({
    data: z.unknown().optional(),
    artifacts: z.array(Artifact).optional(),
    summary: z.string().optional(),
  }),
  execution: z
    .strictObject({
      duration: z.number().nonnegative("must not be negative"),
      tokensUsed: z.int().nonnegative().optional(),
      /** Addition, set by the orchestrator: attempts made on this agent (retries included). */
      attempts: z.int().nonnegative().optional(),
      /** Addition, set by the orchestrator: ms from the first attempt to this answer, backoff waits included. */
      totalDuration: z.number().nonnegative("must not be negative").optional(),
    })
    .optional(),
  error: z
    .strictObject({
      code: z.string().min(1, "must not be empty"),
      message: z.string(),
      recoverable: z.boolean(),
    })
    .optional(),
});
export type AgentResponse = z.infer<typeof AgentResponse>;

/** What a caller fills in; `Orchestrator.command()` adds id, timestamp, version and from. */
export interface CommandDraft {
  to: string;
  action: Action;
  parameters?: Record<string, unknown>;
  priority?: Priority;
  context?: AgentCommand["context"];
  security?: AgentCommand["security"];
}

/** success and partial carry results; everything else is a failure of some kind. */
export function isSuccessful(response: AgentResponse): boolean {
  return response.status === "success" || response.status === "partial";
}
