import { GatewayUnreachableError } from "../client/errors.js";
import { AcpError, type Problem, problemsOf } from "../protocol/index.js";
import { AgentCommand, ErrorCategory } from "./schemas.js";

/**
 * Why the orchestrator failed a command, when it was the orchestrator and not the agent that
 * decided. Carried in the failed response's `results.data.reason` so a program can branch on it;
 * `error.code` stays one of the command layer's five categories.
 */
export type FailureReason =
  | "invalid_command"
  | "unknown_agent"
  | "permission_denied"
  | "approval_denied"
  | "approval_expired"
  | "approval_unavailable"
  | "circuit_open"
  | "timeout"
  | "deadline"
  | "agent_failed"
  | "invalid_response"
  | "transport_failed"
  | "audit_failed";

/**
 * Thrown by a command handler (in-process or behind `serveCommands`) to fail a command with a
 * category and say whether a retry could help. Anything else thrown is an `agent_error` that is not
 * recoverable: an unknown failure is not retried blindly.
 */
export class CommandError extends Error {
  constructor(
    /** The failure's kind: one of the command layer's five categories, sent as `error.code`. */
    readonly kind: ErrorCategory,
    message: string,
    readonly options: { recoverable?: boolean; reason?: FailureReason; problems?: Problem[] } = {},
  ) {
    super(message);
    this.name = "CommandError";
  }

  /** @deprecated The failure's kind is `kind`; `category` is its former name. */
  get category(): ErrorCategory {
    return this.kind;
  }

  /** Whether trying again (another attempt or a fallback agent) may succeed; the retry policy reads it. */
  get recoverable(): boolean {
    return this.options.recoverable ?? false;
  }
}

/** Abort reason meaning "report as timeout" (a command's timeout, a scatter-gather deadline). */
export class TimeoutAbort extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
    this.name = "TimeoutAbort";
  }
}

/** An orchestrator configuration or job file that does not validate, naming the file and key path. */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly file: string,
    readonly problems: { path: string; line?: number; message: string }[] = [],
  ) {
    super(message);
    this.name = "ConfigError";
  }
}

export function describeProblems(problems: Problem[]): string {
  return problems.map((p) => `${p.path || "/"}: ${p.message}`).join("; ");
}

export interface Classified {
  category: ErrorCategory;
  recoverable: boolean;
  reason: FailureReason;
  message: string;
}

const TRANSIENT = new Set([
  "RateLimited",
  "StorageUnavailable",
  "HandshakeRequired",
  "InternalError",
  "Replay",
  "StaleTimestamp",
]);
const DENIED = new Set(["PermissionDenied", "Forbidden", "Unauthorized", "LayersDeclined"]);

/**
 * The category of a failure raised while delivering a command: a remote peer's or the gateway's
 * AcpError, a handler's CommandError, or anything else. Transport hiccups (rate limit, storage,
 * a forgotten handshake) are recoverable; refusals and malformed exchanges are not.
 */
export function classify(err: unknown): Classified {
  if (err instanceof CommandError) {
    return {
      category: err.kind,
      recoverable: err.recoverable,
      reason: err.options.reason ?? "agent_failed",
      message: err.message,
    };
  }
  if (err instanceof AcpError) {
    if (err.kind === "Timeout")
      return { category: "timeout_error", recoverable: true, reason: "timeout", message: err.message };
    if (DENIED.has(err.kind))
      return {
        category: "permission_error",
        recoverable: false,
        reason: "permission_denied",
        message: err.message,
      };
    if (TRANSIENT.has(err.kind))
      return {
        category: "system_error",
        recoverable: true,
        reason: "transport_failed",
        message: err.message,
      };
    if (err.kind === "InvalidParams" || err.kind === "InvalidRequest" || err.kind === "PayloadTooLarge")
      return { category: "user_error", recoverable: false, reason: "invalid_command", message: err.message };
    return { category: "agent_error", recoverable: false, reason: "transport_failed", message: err.message };
  }
  if (err instanceof GatewayUnreachableError)
    return { category: "system_error", recoverable: true, reason: "transport_failed", message: err.message };
  return {
    category: ErrorCategory.AGENT_ERROR,
    recoverable: false,
    reason: "agent_failed",
    message: err instanceof Error ? err.message : String(err),
  };
}

/** Validates a command, throwing a `user_error` CommandError that names every failing field. */
export function parseCommand(input: unknown): AgentCommand {
  const parsed = AgentCommand.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = problemsOf(parsed.error);
  throw new CommandError("user_error", `invalid command: ${describeProblems(problems)}`, {
    reason: "invalid_command",
    problems,
  });
}
