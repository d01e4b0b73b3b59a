import { type BrokerPolicy, effectiveStatus, expiresAtMs, isoTime, maxDeliveriesDetail } from "./policy.js";
import type { MessageType } from "../protocol/schemas.js";
import type { DeadLetter, MessageRecord, MessageStatus } from "./types.js";

/** A message's status fields as both stores keep them: times in epoch milliseconds. */
export interface StatusFields {
  id: string;
  from: string;
  to: string;
  kind: MessageType;
  method: string;
  submittedAt: string;
  status: MessageStatus;
  queuedAt: number;
  deliveredAt?: number | null;
  acknowledgedAt?: number | null;
  failedAt?: number | null;
  /** Deliveries counted so far (a hand-out given back by closing its inbox is not counted). */
  attempts: number;
  /**
   * When the ack wait of the counted hand-out now out ends; absent when none is out (never handed
   * out, given back by a close, settled). The NATS broker keeps it so that a last delivery nobody
   * answered reads `failed` from that moment, whether or not a gateway is there to write it.
   */
  dueAt?: number | null;
  lastError?: string | null;
  deadLetter?: { reason: DeadLetter["reason"]; detail: string } | null;
}

/** When the message dead-letters on its own: the end of its last allowed delivery's ack wait, if that is out. */
export function deadLetterDueAt(fields: StatusFields, policy: BrokerPolicy): number | null {
  return fields.status === "delivered" &&
    typeof fields.dueAt === "number" &&
    fields.attempts >= policy.maxDeliver
    ? fields.dueAt
    : null;
}

/** The status as of `now`: expiry and an unanswered last delivery applied. */
export function currentStatus(fields: StatusFields, policy: BrokerPolicy, now: number): MessageStatus {
  return effectiveStatus(policy, fields.status, fields.queuedAt, now, deadLetterDueAt(fields, policy));
}

/** The one place a stored status becomes the public record (expiry and dead letters applied, ISO times). */
export function buildRecord(fields: StatusFields, policy: BrokerPolicy, now: number): MessageRecord {
  const status = currentStatus(fields, policy, now);
  const record: MessageRecord = {
    id: fields.id,
    from: fields.from,
    to: fields.to,
    kind: fields.kind,
    method: fields.method,
    submittedAt: fields.submittedAt,
    status,
    queuedAt: isoTime(fields.queuedAt),
    retryCount: Math.max(0, fields.attempts - 1),
  };
  let { failedAt, lastError, deadLetter } = fields;
  if (status === "failed" && fields.status !== "failed") {
    // Dead-lettered by the clock: the record reads as the dead-letter write will make it.
    const detail = maxDeliveriesDetail(fields.attempts);
    failedAt = fields.dueAt;
    lastError = detail;
    deadLetter = { reason: "max-deliveries", detail };
  }
  if (typeof fields.deliveredAt === "number") record.deliveredAt = isoTime(fields.deliveredAt);
  if (typeof fields.acknowledgedAt === "number") record.acknowledgedAt = isoTime(fields.acknowledgedAt);
  if (typeof failedAt === "number") record.failedAt = isoTime(failedAt);
  const expiresAt = expiresAtMs(policy, fields.queuedAt);
  if (now >= expiresAt) record.expiredAt = isoTime(expiresAt);
  if (typeof lastError === "string") record.lastError = lastError;
  if (deadLetter && typeof failedAt === "number") {
    record.deadLetter = { ...deadLetter, at: isoTime(failedAt) };
  }
  return record;
}
