import type { JsMsg } from "@nats-io/jetstream";
import { ackWaitFor, type BrokerPolicy, isoTime, maxDeliveriesDetail } from "../policy.js";
import type { Delivery } from "../types.js";
import type { MessageHeaders } from "./headers.js";
import { routeHoldsUntil } from "./routed.js";
import type { Decision, StatusDoc, Versioned } from "./status-store.js";

/**
 * What an inbox does with a message JetStream sent it, as its status record decides: hand it out
 * as attempt `attempt`; write the record first and decide again (`again`); ack a late duplicate or
 * one already acknowledged; term one already failed; dead-letter it (`dead`, with the record
 * written); or hold it for its route until `untilMs` (`defer`).
 */
export type HandOut =
  | { outcome: "deliver"; attempt: number }
  | { outcome: "again" | "ack" | "term" }
  | { outcome: "dead"; record: StatusDoc }
  | { outcome: "defer"; untilMs: number };

/** What `decideHandOut` needs besides the record. */
export interface HandOutContext {
  policy: BrokerPolicy;
  /** The broker instance handing it out: the record's `holder`. */
  instanceId: string;
  msg: JsMsg;
  headers: MessageHeaders;
  /** Where an ack or term of this hand-out goes, from any gateway. */
  ackSubject: string | undefined;
  /** Whether the message's route (if any) is at a broker instance that still answers. */
  routeAlive: boolean;
  /** Whether quota usage is kept: a record written here then carries the envelope's bytes. */
  countsUsage: boolean;
  now: number;
}

/** The status record's decision on a message pulled from the inbox stream, and the record to write. */
export function decideHandOut(
  current: Versioned<StatusDoc> | null,
  context: HandOutContext,
): Decision<HandOut> {
  const { policy, msg, headers, now } = context;
  // The submitting gateway writes the record right after its publish. If this delivery is
  // faster, write the record as the submit would have (queued) first, then go on as usual.
  if (!current) {
    const usage = context.countsUsage ? { usageBytes: msg.data.length } : {};
    return {
      next: { ...headers, status: "queued", attempts: 0, seq: msg.seq, ...usage },
      result: { outcome: "again" },
    };
  }
  const base = current.value;
  // A late duplicate copy (submitted again after the dedup window) is dropped silently.
  if (base.seq !== msg.seq || base.status === "acknowledged") return { result: { outcome: "ack" } };
  if (base.status === "failed") return { result: { outcome: "term" } };
  // Routed to one socket of the agent (routed.ts): not the queue's while the route holds it.
  const held = context.routeAlive ? routeHoldsUntil(base, now) : null;
  if (held !== null) return { result: { outcome: "defer", untilMs: held } };
  if (base.attempts >= policy.maxDeliver) {
    // The last allowed delivery's ack wait ran out (a hand-out given back is not counted).
    const detail = maxDeliveriesDetail(base.attempts);
    const record: StatusDoc = {
      ...base,
      status: "failed",
      failedAt: Math.min(now, base.dueAt ?? now),
      dueAt: undefined,
      ackSubject: undefined,
      lastError: detail,
      deadLetter: { reason: "max-deliveries", detail },
    };
    return { next: record, result: { outcome: "dead", record } };
  }
  const attempt = base.attempts + 1;
  const next: StatusDoc = {
    ...base,
    status: "delivered",
    deliveredAt: base.deliveredAt ?? now,
    attempts: attempt,
    dueAt: now + ackWaitFor(policy, attempt),
    ackSubject: context.ackSubject,
    holder: context.instanceId,
    route: undefined,
  };
  return { next, result: { outcome: "deliver", attempt } };
}

/** The delivery handed to the consumer for attempt `attempt`, whose ack wait is `ackWaitMs`. */
export function toDelivery(
  msg: JsMsg,
  headers: MessageHeaders,
  attempt: number,
  ackWaitMs: number,
): Delivery {
  return {
    id: headers.id,
    from: headers.from,
    to: headers.to,
    kind: headers.kind,
    method: headers.method,
    envelope: msg.string(),
    submittedAt: headers.submittedAt,
    queuedAt: isoTime(headers.queuedAt),
    attempt,
    priority: headers.priority,
    ackWaitMs,
  };
}
