import type Database from "better-sqlite3";
import { type BrokerPolicy, expiresAtMs, isoTime } from "../policy.js";
import { buildRecord } from "../records.js";
import type {
  DeadLetter,
  Delivery,
  ListQuery,
  MessageKind,
  MessageRecord,
  MessageStatus,
  StoredMessage,
  SubmitInput,
} from "../types.js";

export interface MessageRow {
  seq: number;
  id: string;
  sender: string;
  recipient: string;
  kind: MessageKind;
  method: string;
  envelope: string | null;
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
}

const COLUMNS = `seq, id, sender, recipient, kind, method, envelope, submitted_at, queued_at, status, delivered_at,
  acknowledged_at, failed_at, attempts, next_attempt_at, last_error, dead_letter_reason, dead_letter_detail`;
const SWEEP_BATCH = 500;

/** The `messages` table: every statement prepared once, no SQL elsewhere. */
export class MessageTable {
  private readonly insertStmt: Database.Statement;
  private readonly byIdStmt: Database.Statement<[string], MessageRow>;
  private readonly deliveredStmt: Database.Statement;
  private readonly acknowledgedStmt: Database.Statement;
  private readonly failedStmt: Database.Statement;
  private readonly unsettledStmt: Database.Statement<[string, number, number], MessageRow>;
  private readonly exhaustedStmt: Database.Statement<[number, number], MessageRow>;
  private readonly afterSeqStmt: Database.Statement<[number, number], MessageRow>;
  private readonly expiredThroughStmt: Database.Statement<[], { value: number }>;
  private readonly setExpiredThroughStmt: Database.Statement;
  private readonly expireRangeStmt: Database.Statement;
  private readonly purgeStmt: Database.Statement;
  private readonly latestStmt: Database.Statement<[], { queued_at: number }>;
  private readonly listStatements = new Map<string, Database.Statement<unknown[], MessageRow>>();

  constructor(private readonly db: Database.Database) {
    this.insertStmt = db.prepare(
      `INSERT INTO messages (id, sender, recipient, kind, method, envelope, submitted_at, queued_at, status)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued') ON CONFLICT(id) DO NOTHING`,
    );
    this.byIdStmt = db.prepare(`SELECT ${COLUMNS} FROM messages WHERE id = ?`);
    this.deliveredStmt = db.prepare(
      `UPDATE messages SET status = 'delivered', delivered_at = coalesce(delivered_at, ?), attempts = ?,
       next_attempt_at = ? WHERE seq = ? AND status IN ('queued', 'delivered')`,
    );
    this.acknowledgedStmt = db.prepare(
      `UPDATE messages SET status = 'acknowledged', acknowledged_at = ?, next_attempt_at = NULL
       WHERE seq = ? AND status IN ('queued', 'delivered')`,
    );
    this.failedStmt = db.prepare(
      `UPDATE messages SET status = 'failed', failed_at = ?, next_attempt_at = NULL, last_error = ?,
       dead_letter_reason = ?, dead_letter_detail = ? WHERE seq = ? AND status IN ('queued', 'delivered')`,
    );
    this.unsettledStmt = db.prepare(
      `SELECT ${COLUMNS} FROM messages WHERE recipient = ? AND seq > ? AND status IN ('queued', 'delivered')
       ORDER BY seq LIMIT ?`,
    );
    this.exhaustedStmt = db.prepare(
      `SELECT ${COLUMNS} FROM messages WHERE status IN ('queued', 'delivered') AND attempts >= ?
       AND next_attempt_at <= ?`,
    );
    this.afterSeqStmt = db.prepare(`SELECT ${COLUMNS} FROM messages WHERE seq > ? ORDER BY seq LIMIT ?`);
    this.expiredThroughStmt = db.prepare("SELECT value FROM meta WHERE name = 'expired_through_seq'");
    this.setExpiredThroughStmt = db.prepare("UPDATE meta SET value = ? WHERE name = 'expired_through_seq'");
    this.expireRangeStmt = db.prepare(
      `UPDATE messages SET envelope = NULL, status = CASE WHEN status IN ('queued', 'delivered')
       THEN 'expired' ELSE status END WHERE seq > ? AND seq <= ?`,
    );
    this.purgeStmt = db.prepare("DELETE FROM messages WHERE seq <= ?");
    this.latestStmt = db.prepare("SELECT queued_at FROM messages ORDER BY seq DESC LIMIT 1");
  }

  /** Highest `queued_at` stored, so new rows never go back in time after a restart. */
  latestQueuedAt(): number {
    return this.latestStmt.get()?.queued_at ?? 0;
  }

  /** Returns the new row, or undefined if the id exists already. */
  insert(input: SubmitInput, queuedAt: number): MessageRow | undefined {
    const info = this.insertStmt.run(
      input.id,
      input.from,
      input.to,
      input.kind,
      input.method,
      input.envelope,
      input.submittedAt,
      queuedAt,
    );
    if (info.changes === 0) return undefined;
    return {
      seq: Number(info.lastInsertRowid),
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
    };
  }

  byId(id: string): MessageRow | undefined {
    return this.byIdStmt.get(id);
  }

  /** Each write returns whether it applied: a settled message is never changed again. */
  markDelivered(row: MessageRow): boolean {
    return this.deliveredStmt.run(row.delivered_at, row.attempts, row.next_attempt_at, row.seq).changes > 0;
  }

  markAcknowledged(seq: number, at: number): boolean {
    return this.acknowledgedStmt.run(at, seq).changes > 0;
  }

  markFailed(seq: number, at: number, reason: DeadLetter["reason"], detail: string): boolean {
    return this.failedStmt.run(at, detail, reason, detail, seq).changes > 0;
  }

  /** Messages to `recipient` still waiting for an ack, after `afterSeq`, in order. */
  unsettled(recipient: string, afterSeq: number, limit: number): MessageRow[] {
    return this.unsettledStmt.all(recipient, afterSeq, limit);
  }

  /** Messages whose last allowed delivery went unacknowledged (their inbox was closed meanwhile). */
  exhausted(maxDeliver: number, now: number): MessageRow[] {
    return this.exhaustedStmt.all(maxDeliver, now);
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
      return `SELECT * FROM (SELECT ${COLUMNS} FROM messages WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?)`;
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
   * Drops envelopes queued at or before `cutoff` (and marks unsettled ones expired), oldest first,
   * at most one batch per call. Returns the rows that became `expired`. Progress is kept in `meta`.
   */
  expireThrough(cutoff: number): MessageRow[] {
    const from = this.expiredThroughStmt.get()?.value ?? 0;
    const candidates = this.afterSeqStmt.all(from, SWEEP_BATCH);
    const stop = candidates.findIndex((row) => row.queued_at > cutoff);
    const expiring = stop === -1 ? candidates : candidates.slice(0, stop);
    const last = expiring.at(-1);
    if (!last) return [];
    this.expireRangeStmt.run(from, last.seq);
    this.setExpiredThroughStmt.run(last.seq);
    return expiring.filter((row) => row.status === "queued" || row.status === "delivered");
  }

  /** Deletes records queued at or before `cutoff`, oldest first, one batch per call. Returns how many. */
  purgeThrough(cutoff: number): number {
    const rows = this.afterSeqStmt.all(0, SWEEP_BATCH);
    const stop = rows.findIndex((row) => row.queued_at > cutoff);
    const last = (stop === -1 ? rows : rows.slice(0, stop)).at(-1);
    if (!last) return 0;
    return this.purgeStmt.run(last.seq).changes;
  }
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

export function toStoredMessage(row: MessageRow, policy: BrokerPolicy, now: number): StoredMessage {
  const expired = now >= expiresAtMs(policy, row.queued_at);
  return { ...toRecord(row, policy, now), envelope: expired ? null : row.envelope };
}

export function toDelivery(row: MessageRow): Delivery {
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
  };
}
