import type { OrchestrationConfig } from "./config.js";
import { failureReason } from "./responses.js";
import type { AgentCommand, AgentResponse } from "./schemas.js";

export interface BackoffPolicy {
  maxAttempts: number;
  backoffMs: number;
  multiplier: number;
  maxBackoffMs: number;
  jitter: boolean;
}

/** The command's own `context.retryPolicy` wins over the configuration's `retry` section. */
export function backoffPolicyFor(command: AgentCommand, config: OrchestrationConfig): BackoffPolicy {
  const own = command.context?.retryPolicy;
  return {
    maxAttempts: own?.maxAttempts ?? config.retry.max_attempts,
    backoffMs: own?.backoffMs ?? config.retry.backoff_ms,
    multiplier: config.retry.backoff_multiplier,
    maxBackoffMs: config.retry.max_backoff_ms,
    jitter: config.retry.jitter,
  };
}

/**
 * The wait before retry number `retry` (1 = before the second attempt): exponential, capped, and
 * with "equal jitter" (uniform between half and all of it) so that many callers failing together
 * do not retry in lockstep, while the wait still grows with every attempt.
 */
export function backoffDelay(policy: BackoffPolicy, retry: number, random: () => number): number {
  const exponential = Math.min(policy.maxBackoffMs, policy.backoffMs * policy.multiplier ** (retry - 1));
  if (!policy.jitter) return Math.round(exponential);
  return Math.round(exponential / 2 + random() * (exponential / 2));
}

/**
 * Only a failure the agent marked recoverable (or a timeout) is retried: the command layer's sample retried
 * everything, including invalid input and refused permissions, which can never succeed. An open
 * circuit is not retried either: the reset timeout is far longer than any backoff.
 */
export function isRetriable(response: AgentResponse): boolean {
  if (response.status !== "failed" && response.status !== "timeout") return false;
  const code = response.error?.code;
  if (code === "user_error" || code === "permission_error") return false;
  if (failureReason(response) === "circuit_open") return false;
  return response.status === "timeout" || response.error?.recoverable === true;
}

/** Failures that say something about the target's health, so another agent may do better. */
export function warrantsFallback(response: AgentResponse): boolean {
  if (response.status === "timeout") return true;
  if (response.status !== "failed") return false;
  const code = response.error?.code;
  return code === "agent_error" || code === "system_error" || code === "timeout_error";
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
