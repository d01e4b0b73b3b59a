import { type BrokerPolicy, effectiveStatus, expiresAtMs, isoTime } from "./policy.js";
import type { DeadLetter, MessageKind, MessageRecord, MessageStatus } from "./types.js";

/** A message's status fields as both stores keep them: times in epoch milliseconds. */
export interface StatusFields {
  id: string;
  from: string;
  to: string;
  kind: MessageKind;
  method: string;
  submittedAt: string;
  status: MessageStatus;
  queuedAt: number;
  deliveredAt?: number | null;
  acknowledgedAt?: number | null;
  failedAt?: number | null;
  /** Deliveries so far. */
  attempts: number;
  lastError?: string | null;
  deadLetter?: { reason: DeadLetter["reason"]; detail: string } | null;
}

/** The one place a stored status becomes the public record (expiry applied, ISO times). */
export function buildRecord(fields: StatusFields, policy: BrokerPolicy, now: number): MessageRecord {
  const record: MessageRecord = {
    id: fields.id,
    from: fields.from,
    to: fields.to,
    kind: fields.kind,
    method: fields.method,
    submittedAt: fields.submittedAt,
    status: effectiveStatus(policy, fields.status, fields.queuedAt, now),
    queuedAt: isoTime(fields.queuedAt),
    retryCount: Math.max(0, fields.attempts - 1),
  };
  if (typeof fields.deliveredAt === "number") record.deliveredAt = isoTime(fields.deliveredAt);
  if (typeof fields.acknowledgedAt === "number") record.acknowledgedAt = isoTime(fields.acknowledgedAt);
  if (typeof fields.failedAt === "number") record.failedAt = isoTime(fields.failedAt);
  const expiresAt = expiresAtMs(policy, fields.queuedAt);
  if (now >= expiresAt) record.expiredAt = isoTime(expiresAt);
  if (typeof fields.lastError === "string") record.lastError = fields.lastError;
  if (fields.deadLetter && typeof fields.failedAt === "number") {
    record.deadLetter = { ...fields.deadLetter, at: isoTime(fields.failedAt) };
  }
  return record;
}
