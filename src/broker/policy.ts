/**
 * Delivery and retention rules, resolved once from the options and shared by both brokers so they
 * redeliver, dead-letter and expire on the same schedule.
 */
import { BrokerError } from "./errors.js";
import type { CommonBrokerOptions, MessageStatus } from "./types.js";

const DAY_MS = 24 * 60 * 60 * 1000;

export const DEFAULT_MAX_IN_FLIGHT = 32;
/** The platform flavour's "5 retry attempts": the first delivery and five more. */
export const DEFAULT_MAX_DELIVER = 6;

export type Warn = (message: string) => void;

export function warner(options: CommonBrokerOptions, prefix: string): Warn {
  const sink = options.onWarning ?? ((message: string) => process.emitWarning(message));
  return (message) => sink(`${prefix}: ${message}`);
}

/** What the broker does by itself that an operator may want to follow (`onNotice`; default: nothing). */
export function noticer(options: CommonBrokerOptions, prefix: string): Warn {
  const sink = options.onNotice;
  return (message) => sink?.(`${prefix}: ${message}`);
}
export const DEFAULT_LIST_LIMIT = 50;

export interface BrokerPolicy {
  ackWaitMs: number;
  maxDeliver: number;
  backoffFactor: number;
  retentionMs: number;
  recordRetentionMs: number;
}

function positive(value: number | undefined, fallback: number, field: string, integer = true): number {
  const resolved = value ?? fallback;
  if (!Number.isFinite(resolved) || resolved <= 0 || (integer && !Number.isInteger(resolved))) {
    throw new BrokerError(
      "invalid_argument",
      `${field} must be a positive ${integer ? "integer" : "number"}`,
      {
        field,
      },
    );
  }
  return resolved;
}

export function resolvePolicy(options: CommonBrokerOptions): BrokerPolicy {
  const delivery = options.delivery ?? {};
  const policy: BrokerPolicy = {
    ackWaitMs: positive(delivery.ackWaitMs, 30_000, "delivery.ackWaitMs"),
    maxDeliver: positive(delivery.maxDeliver, DEFAULT_MAX_DELIVER, "delivery.maxDeliver"),
    backoffFactor: positive(delivery.backoffFactor, 2, "delivery.backoffFactor", false),
    retentionMs: positive(options.retentionMs, 7 * DAY_MS, "retentionMs"),
    recordRetentionMs: positive(options.recordRetentionMs, 30 * DAY_MS, "recordRetentionMs"),
  };
  if (policy.backoffFactor < 1) {
    throw new BrokerError("invalid_argument", "delivery.backoffFactor must be at least 1", {
      field: "delivery.backoffFactor",
    });
  }
  if (policy.recordRetentionMs < policy.retentionMs) {
    throw new BrokerError("invalid_argument", "recordRetentionMs must be at least retentionMs", {
      field: "recordRetentionMs",
    });
  }
  return policy;
}

/**
 * How long delivery number `attempt` (1-based) waits for its ack. JetStream's rule: a consumer with
 * max_deliver N takes N-1 backoff values and reuses the last one, so the final wait equals the one
 * before it.
 */
export function ackWaitFor(policy: BrokerPolicy, attempt: number): number {
  const step = Math.max(1, Math.min(attempt, policy.maxDeliver - 1));
  return Math.round(policy.ackWaitMs * policy.backoffFactor ** (step - 1));
}

/** The JetStream consumer `backoff` list (milliseconds) that reproduces `ackWaitFor`. */
export function backoffSchedule(policy: BrokerPolicy): number[] {
  return Array.from({ length: policy.maxDeliver - 1 }, (_, index) => ackWaitFor(policy, index + 1));
}

export function expiresAtMs(policy: BrokerPolicy, queuedAtMs: number): number {
  return queuedAtMs + policy.retentionMs;
}

/**
 * Undelivered or unacknowledged messages past retention read as `expired`; terminal states stay.
 * `failsAtMs`: when an unanswered last allowed delivery dead-letters (its ack wait's end), if one is
 * out; from then on the message reads `failed`, unless retention ended first.
 */
export function effectiveStatus(
  policy: BrokerPolicy,
  stored: MessageStatus,
  queuedAtMs: number,
  nowMs: number,
  failsAtMs: number | null = null,
): MessageStatus {
  if (stored !== "queued" && stored !== "delivered") return stored;
  const expiresAt = expiresAtMs(policy, queuedAtMs);
  if (failsAtMs !== null && nowMs >= failsAtMs && failsAtMs < expiresAt) return "failed";
  return nowMs >= expiresAt ? "expired" : stored;
}

/** The dead-letter detail when the last allowed delivery went unacknowledged. */
export function maxDeliveriesDetail(attempts: number): string {
  return `not acknowledged after ${attempts} deliveries`;
}

/**
 * A message's times are formatted again for each of its status records, and messages committed
 * together share theirs: a lookup here costs ~40 ns against ~400 for formatting.
 */
const recentIsoTimes = new Map<number, string>();

/** Epoch milliseconds as an ISO 8601 UTC timestamp. */
export function isoTime(ms: number): string {
  let text = recentIsoTimes.get(ms);
  if (text === undefined) {
    if (recentIsoTimes.size >= 1024) recentIsoTimes.clear();
    text = new Date(ms).toISOString();
    recentIsoTimes.set(ms, text);
  }
  return text;
}
