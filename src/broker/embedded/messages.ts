import { DEFAULT_PRIORITY, priorityOfRank, priorityRank } from "../../protocol/priority.js";
import type { MessageType } from "../../protocol/schemas.js";
import { type BrokerPolicy, expiresAtMs, isoTime } from "../policy.js";
import { buildRecord } from "../records.js";
import type {
  DeadLetter,
  Delivery,
  ListQuery,
  MessageRecord,
  MessageRef,
  MessageStatus,
  StoredMessage,
  SubmitInput,
} from "../types.js";
import { refKey } from "../validation.js";
import type { SqliteDatabase, SqliteStatement } from "./sqlite.js";

/** A message's row in `messages` (status and routing; the envelope is in `message_bodies`). */
export interface MessageRow {
  seq: number;
  id: string;
  sender: string;
  recipient: string;
  kind: MessageType;
  method: string;
  submitted_at: string;
  queued_at: number;
  status: MessageStatus;
  delivered_at: number | null;
  acknowledged_at: number | null;
  failed_at: number | null;
  attempts: number;
  next_attempt_at: number | null;
  last_error: string | null;
  dead_letter_reason: DeadLetter["reason"] | null;
  dead_letter_detail: string | null;
  /** The envelope's UTF-8 size (what the quotas count). */
  bytes: number;
  /** Its rank in the recipient's queue (priorityRank: 0 low to 3 critical). */
  priority: number;
}

/** What the retention sweeps read of a row: where the batch ends, and whose stored bytes it frees. */
export interface SweptRow {
  seq: number;
  queued_at: number;
  sender: string;
  bytes: number;
}

/** A row with its envelope, as inboxes hold them (null once retention removed it). */
export interface LoadedMessage extends MessageRow {
  envelope: string | null;
}

const COLUMNS = `m.seq, m.id, m.sender, m.recipient, m.kind, m.method, m.submitted_at, m.queued_at, m.status,
  m.delivered_at, m.acknowledged_at, m.failed_at, m.attempts, m.next_attempt_at, m.last_error,
  m.dead_letter_reason, m.dead_letter_detail, m.bytes, m.priority`;
export const SWEEP_BATCH = 500;
const UNSETTLED = "status IN ('queued', 'delivered')";

/** The `messages` and `message_bodies` tables: every statement prepared once, no SQL elsewhere. */
export class MessageTable {
  private readonly insertStmt: SqliteStatement;
  private readonly insertBodyStmt: SqliteStatement;
  private readonly byRefStmt: SqliteStatement<[string, string], MessageRow>;
  private readonly waitingSendersStmt: SqliteStatement<[string, string], { sender: string }>;
  private readonly sendersStmt: SqliteStatement<[string, string], { sender: string }>;
  private readonly bodyStmt: SqliteStatement<[number], { envelope: string }>;
  private readonly deliveredStmt: SqliteStatement;
  private readonly acknowledgedStmt: SqliteStatement;
  private readonly failedStmt: SqliteStatement;
  private readonly unsettledStmt: SqliteStatement<[string, number, number], LoadedMessage>;
  private readonly exhaustedStmt: SqliteStatement<[number, number], MessageRow>;
  private readonly sweptStmt: SqliteStatement<[number, number], SweptRow>;
  private readonly unsettledInRangeStmt: SqliteStatement<[number, number], MessageRow>;
  private readonly expiredThroughStmt: SqliteStatement<[], { value: number }>;
  private readonly setExpiredThroughStmt: SqliteStatement;
  private readonly dropBodiesStmt: SqliteStatement;
  private readonly expireRangeStmt: SqliteStatement;
  private readonly purgeStmt: SqliteStatement;
  private readonly latestStmt: SqliteStatement<[], { queued_at: number }>;
  private readonly oldestStmt: SqliteStatement<[], { queued_at: number }>;
  private readonly listStatements = new Map<string, SqliteStatement<unknown[], MessageRow>>();

  constructor(private readonly db: SqliteDatabase) {
    this.insertStmt = db.prepare(
      `INSERT INTO messages (id, sender, recipient, kind, method, submitted_at, queued_at, status, bytes, priority)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?) ON CONFLICT(sender, id) DO NOTHING`,
    );
    this.insertBodyStmt = db.prepare("INSERT INTO message_bodies (seq, envelope) VALUES (?, ?)");
    this.byRefStmt = db.prepare(`SELECT ${COLUMNS} FROM messages m WHERE m.sender = ? AND m.id = ?`);
    this.bodyStmt = db.prepare("SELECT envelope FROM message_bodies WHERE seq = ?");
    // INDEXED BY: a lookup in messages_to, never a walk of the recipient's messages in another index.
    this.waitingSendersStmt = db.prepare(
      `SELECT sender FROM messages INDEXED BY messages_to WHERE recipient = ? AND id = ? AND ${UNSETTLED} LIMIT 2`,
    );
    this.sendersStmt = db.prepare(
      "SELECT sender FROM messages INDEXED BY messages_to WHERE recipient = ? AND id = ? LIMIT 2",
    );
    this.deliveredStmt = db.prepare(
      `UPDATE messages SET status = 'delivered', delivered_at = coalesce(delivered_at, ?), attempts = ?,
       next_attempt_at = ? WHERE seq = ? AND ${UNSETTLED}`,
    );
    // Settling also records the delivery, so a delivery acked before its own write was flushed costs one write.
    this.acknowledgedStmt = db.prepare(
      `UPDATE messages SET status = 'acknowledged', acknowledged_at = ?, delivered_at = coalesce(delivered_at, ?),
       attempts = max(attempts, ?), next_attempt_at = NULL WHERE seq = ? AND ${UNSETTLED}`,
    );
    this.failedStmt = db.prepare(
      `UPDATE messages SET status = 'failed', failed_at = ?, delivered_at = coalesce(delivered_at, ?),
       attempts = max(attempts, ?), next_attempt_at = NULL, last_error = ?, dead_letter_reason = ?,
       dead_letter_detail = ? WHERE seq = ? AND ${UNSETTLED}`,
    );
    this.unsettledStmt = db.prepare(
      // INDEXED BY: the planner would otherwise walk the agent's whole history in messages_by_recipient.
      `SELECT ${COLUMNS}, b.envelope FROM messages m INDEXED BY messages_waiting
       LEFT JOIN message_bodies b ON b.seq = m.seq
       WHERE m.recipient = ? AND m.seq > ? AND m.${UNSETTLED} ORDER BY m.seq LIMIT ?`,
    );
    this.exhaustedStmt = db.prepare(
      // INDEXED BY: only messages out for delivery are in messages_out; the planner would walk every unsettled one.
      `SELECT ${COLUMNS} FROM messages m INDEXED BY messages_out
       WHERE m.${UNSETTLED} AND m.next_attempt_at IS NOT NULL AND m.next_attempt_at <= ? AND m.attempts >= ?`,
    );
    // The sweeps read only what they need of each row: whole rows cost ten times as much to read.
    this.sweptStmt = db.prepare(
      "SELECT seq, queued_at, sender, bytes FROM messages WHERE seq > ? ORDER BY seq LIMIT ?",
    );
    this.unsettledInRangeStmt = db.prepare(
      `SELECT ${COLUMNS} FROM messages m WHERE m.seq > ? AND m.seq <= ? AND m.${UNSETTLED}`,
    );
    this.expiredThroughStmt = db.prepare("SELECT value FROM meta WHERE name = 'expired_through_seq'");
    this.setExpiredThroughStmt = db.prepare("UPDATE meta SET value = ? WHERE name = 'expired_through_seq'");
    this.dropBodiesStmt = db.prepare("DELETE FROM message_bodies WHERE seq > ? AND seq <= ?");
    this.expireRangeStmt = db.prepare(
      `UPDATE messages SET status = 'expired' WHERE seq > ? AND seq <= ? AND ${UNSETTLED}`,
    );
    this.purgeStmt = db.prepare("DELETE FROM messages WHERE seq <= ?");
    this.latestStmt = db.prepare("SELECT queued_at FROM messages ORDER BY seq DESC LIMIT 1");
    this.oldestStmt = db.prepare("SELECT queued_at FROM messages ORDER BY seq LIMIT 1");
  }

  /** The retention sweep's progress: every message up to this sequence number has had its envelope dropped. */
  expiredThroughSeq(): number {
    return this.expiredThroughStmt.get()?.value ?? 0;
  }

  /** Highest `queued_at` stored, so new rows never go back in time after a restart. */
  latestQueuedAt(): number {
    return this.latestStmt.get()?.queued_at ?? 0;
  }

  /** Returns the new row, or undefined if the sender's id exists already. */
  insert(input: SubmitInput, queuedAt: number, bytes: number): LoadedMessage | undefined {
    const priority = priorityRank(input.priority ?? DEFAULT_PRIORITY);
    const info = this.insertStmt.run(
      input.id,
      input.from,
      input.to,
      input.kind,
      input.method,
      input.submittedAt,
      queuedAt,
      bytes,
      priority,
    );
    if (info.changes === 0) return undefined;
    const seq = Number(info.lastInsertRowid);
    this.insertBodyStmt.run(seq, input.envelope);
    return {
      seq,
      id: input.id,
      sender: input.from,
      recipient: input.to,
      kind: input.kind,
      method: input.method,
      envelope: input.envelope,
      submitted_at: input.submittedAt,
      queued_at: queuedAt,
      status: "queued",
      delivered_at: null,
      acknowledged_at: null,
      failed_at: null,
      attempts: 0,
      next_attempt_at: null,
      last_error: null,
      dead_letter_reason: null,
      dead_letter_detail: null,
      bytes,
      priority,
    };
  }

  byRef(message: MessageRef): MessageRow | undefined {
    return this.byRefStmt.get(message.from, message.id);
  }

  /** Up to two senders of a message to `recipient` with this id: those still waiting, else any. */
  sendersTo(recipient: string, id: string): string[] {
    const waiting = this.waitingSendersStmt.all(recipient, id);
    const rows = waiting.length > 0 ? waiting : this.sendersStmt.all(recipient, id);
    return rows.map((row) => row.sender);
  }

  envelope(seq: number): string | null {
    return this.bodyStmt.get(seq)?.envelope ?? null;
  }

  /** Each write returns whether it applied: a settled message is never changed again. */
  markDelivered(row: MessageRow): boolean {
    return this.deliveredStmt.run(row.delivered_at, row.attempts, row.next_attempt_at, row.seq).changes > 0;
  }

  /** `row` carries the delivery fields as this process knows them (maybe not flushed yet). */
  markAcknowledged(row: MessageRow, at: number): boolean {
    return this.acknowledgedStmt.run(at, row.delivered_at, row.attempts, row.seq).changes > 0;
  }

  markFailed(row: MessageRow, at: number, reason: DeadLetter["reason"], detail: string): boolean {
    return (
      this.failedStmt.run(at, row.delivered_at, row.attempts, detail, reason, detail, row.seq).changes > 0
    );
  }

  /** Messages to `recipient` still waiting for an ack, after `afterSeq`, in order, with envelopes. */
  unsettled(recipient: string, afterSeq: number, limit: number): LoadedMessage[] {
    return this.unsettledStmt.all(recipient, afterSeq, limit);
  }

  /** Messages whose last allowed delivery went unacknowledged (out when the process died). */
  exhausted(maxDeliver: number, now: number): MessageRow[] {
    return this.exhaustedStmt.all(now, maxDeliver);
  }

  /**
   * One page for `list`. The participant filter is a UNION of two index walks (as sender, as
   * recipient), each stopping after `limit` rows, instead of an OR that would sort all history.
   */
  list(query: ListQuery, afterSeq: number, limit: number, expiredBefore: number): MessageRow[] {
    const { participant, from, to } = query;
    const sides: Array<{ sender?: string; recipient?: string }> = [];
    if (from !== undefined && to !== undefined) {
      if (participant === from || participant === to) sides.push({ sender: from, recipient: to });
    } else if (from !== undefined) {
      sides.push(from === participant ? { sender: from } : { sender: from, recipient: participant });
    } else if (to !== undefined) {
      sides.push(to === participant ? { recipient: to } : { sender: participant, recipient: to });
    } else {
      sides.push({ sender: participant }, { recipient: participant });
    }
    if (sides.length === 0) return [];
    const params: unknown[] = [];
    const selects = sides.map((side) => {
      const where = ["seq > ?"];
      params.push(afterSeq);
      if (side.sender !== undefined) {
        where.push("sender = ?");
        params.push(side.sender);
      }
      if (side.recipient !== undefined) {
        where.push("recipient = ?");
        params.push(side.recipient);
      }
      if (query.kind !== undefined) {
        where.push("kind = ?");
        params.push(query.kind);
      }
      if (query.method !== undefined) {
        where.push("method = ?");
        params.push(query.method);
      }
      if (query.status !== undefined) {
        where.push(
          "(CASE WHEN status IN ('queued', 'delivered') AND queued_at <= ? THEN 'expired' ELSE status END) = ?",
        );
        params.push(expiredBefore, query.status);
      }
      params.push(limit);
      return `SELECT * FROM (SELECT ${COLUMNS} FROM messages m WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?)`;
    });
    params.push(limit);
    const sql = `${selects.join(" UNION ")} ORDER BY seq LIMIT ?`;
    let statement = this.listStatements.get(sql);
    if (!statement) {
      statement = this.db.prepare<unknown[], MessageRow>(sql);
      this.listStatements.set(sql, statement);
    }
    return statement.all(...params);
  }

  /**
   * Drops the envelopes queued at or before `cutoff` (and marks unsettled ones expired), oldest
   * first, one batch of at most `limit` rows per call; progress is kept in `meta`. Returns the rows
   * that became `expired` (as they were), every row whose envelope was dropped, and whether more may
   * be due.
   */
  expireThrough(
    cutoff: number,
    limit = SWEEP_BATCH,
  ): { expired: MessageRow[]; dropped: SweptRow[]; more: boolean } {
    const from = this.expiredThroughSeq();
    const candidates = this.sweptStmt.all(from, limit);
    const stop = candidates.findIndex((row) => row.queued_at > cutoff);
    const expiring = stop === -1 ? candidates : candidates.slice(0, stop);
    const last = expiring.at(-1);
    if (!last) return { expired: [], dropped: [], more: false };
    const expired = this.unsettledInRangeStmt.all(from, last.seq);
    this.dropBodiesStmt.run(from, last.seq);
    this.expireRangeStmt.run(from, last.seq);
    this.setExpiredThroughStmt.run(last.seq);
    return { expired, dropped: expiring, more: stop === -1 && candidates.length === limit };
  }

  /** Deletes records queued at or before `cutoff`, oldest first, one batch per call; whether more may be due. */
  purgeThrough(cutoff: number, limit = SWEEP_BATCH): { purged: number; more: boolean } {
    // Records are kept longer than envelopes, so usually none is due: the oldest row says so
    // without reading a whole batch of rows in every sweep batch.
    const oldest = this.oldestStmt.get();
    if (!oldest || oldest.queued_at > cutoff) return { purged: 0, more: false };
    const rows = this.sweptStmt.all(0, limit);
    const stop = rows.findIndex((row) => row.queued_at > cutoff);
    const last = (stop === -1 ? rows : rows.slice(0, stop)).at(-1);
    if (!last) return { purged: 0, more: false };
    return { purged: this.purgeStmt.run(last.seq).changes, more: stop === -1 && rows.length === limit };
  }
}

/** The `refKey` of a row's message. */
export function rowKey(row: Pick<MessageRow, "sender" | "id">): string {
  return refKey({ from: row.sender, id: row.id });
}

export function toRecord(row: MessageRow, policy: BrokerPolicy, now: number): MessageRecord {
  return buildRecord(
    {
      id: row.id,
      from: row.sender,
      to: row.recipient,
      kind: row.kind,
      method: row.method,
      submittedAt: row.submitted_at,
      status: row.status,
      queuedAt: row.queued_at,
      deliveredAt: row.delivered_at,
      acknowledgedAt: row.acknowledged_at,
      failedAt: row.failed_at,
      attempts: row.attempts,
      lastError: row.last_error,
      deadLetter:
        row.dead_letter_reason === null
          ? null
          : { reason: row.dead_letter_reason, detail: row.dead_letter_detail ?? "" },
    },
    policy,
    now,
  );
}

export function toStoredMessage(
  row: MessageRow,
  envelope: string | null,
  policy: BrokerPolicy,
  now: number,
): StoredMessage {
  const expired = now >= expiresAtMs(policy, row.queued_at);
  return { ...toRecord(row, policy, now), envelope: expired ? null : envelope };
}

export function toDelivery(row: LoadedMessage, ackWaitMs: number): Delivery {
  return {
    id: row.id,
    from: row.sender,
    to: row.recipient,
    kind: row.kind,
    method: row.method,
    envelope: row.envelope ?? "",
    submittedAt: row.submitted_at,
    queuedAt: isoTime(row.queued_at),
    attempt: row.attempts,
    priority: priorityOfRank(row.priority),
    ackWaitMs,
  };
}
