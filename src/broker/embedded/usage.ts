/**
 * The embedded broker's quota usage: counters in memory, exact because this process is the only
 * writer of its database. Read from the database (so a restart never drifts): what each recipient
 * has waiting at open, from the index of waiting messages; what a sender has stored when it first
 * needs it (its first submission, or a usage query), from the sender index, which holds each
 * envelope's size, so neither grows with the history the store keeps. Then moved with every row
 * change: a submit adds when it is accepted (before its batch commits, so the next submit of the
 * same turn sees it), a commit that settles a message (ack, reject, dead letter, expiry) subtracts
 * from its recipient's pending, and the retention sweep that drops envelopes subtracts from their
 * senders' stored bytes. Counters follow the rows' stored status, so a message past retention
 * counts until the sweep marks it (within a minute).
 */

import { isBrokerError } from "../errors.js";
import { checkQuotas, NO_USAGE, type ResolvedQuotas } from "../quotas.js";
import type { AgentUsage, SubmitInput } from "../types.js";
import type { MessageRow, MessageTable } from "./messages.js";
import type { SqliteDatabase, SqliteStatement } from "./sqlite.js";

export class UsageCounters {
  readonly #byAgent = new Map<string, AgentUsage>();
  /** Senders whose stored bytes were read; the others' are read when first needed. */
  readonly #storedRead = new Set<string>();
  readonly #storedStmt: SqliteStatement<[string], { bytes: number }>;

  private constructor(
    private readonly quotas: ResolvedQuotas,
    db: SqliteDatabase,
    /** Commits every write accepted so far, so a read of the database sees it. */
    private readonly flush: () => void,
  ) {
    // Envelopes are dropped in seq order: those after the sweep's mark are still stored.
    this.#storedStmt = db.prepare(
      `SELECT total(bytes) AS bytes FROM messages INDEXED BY messages_sent
       WHERE sender = ? AND seq > (SELECT value FROM meta WHERE name = 'expired_through_seq')`,
    );
  }

  /** What every recipient has waiting, from the database; stored bytes follow per sender. */
  static load(db: SqliteDatabase, quotas: ResolvedQuotas, flush: () => void): UsageCounters {
    const counters = new UsageCounters(quotas, db, flush);
    const pending = db
      .prepare(
        `SELECT recipient AS agent, count(*) AS messages, total(bytes) AS bytes FROM messages
         INDEXED BY messages_waiting WHERE status IN ('queued', 'delivered') GROUP BY recipient`,
      )
      .all() as { agent: string; messages: number; bytes: number }[];
    for (const row of pending) counters.#move(row.agent, row.messages, row.bytes, 0);
    return counters;
  }

  usage(agentId: string): AgentUsage {
    this.#readStored(agentId);
    return { ...(this.#byAgent.get(agentId) ?? NO_USAGE) };
  }

  /**
   * Counts a submission before it is written (true; `uncount` it if it turns out not to be
   * stored), or refuses it past a quota (BrokerError `quota`). A resubmission of a message the
   * table holds stores nothing: never refused, not counted (false).
   */
  count(input: SubmitInput, bytes: number, table: MessageTable): boolean {
    this.#readStored(input.from);
    try {
      checkQuotas(
        this.quotas,
        input.to,
        this.#byAgent.get(input.to) ?? NO_USAGE,
        input.from,
        this.#byAgent.get(input.from) ?? NO_USAGE,
        bytes,
      );
    } catch (error) {
      if (isBrokerError(error, "quota") && table.byRef(input) !== undefined) return false;
      throw error;
    }
    this.#move(input.to, 1, bytes, 0);
    this.#move(input.from, 0, 0, bytes);
    return true;
  }

  /** A counted submission was not stored after all (a duplicate, or the write failed). */
  uncount(input: SubmitInput, bytes: number): void {
    this.#move(input.to, -1, -bytes, 0);
    this.#move(input.from, 0, 0, -bytes);
  }

  /** The row left queued/delivered (acknowledged, failed, expired): no longer pending. */
  settled(row: MessageRow): void {
    this.#move(row.recipient, -1, -row.bytes, 0);
  }

  /** The sweep dropped the rows' envelopes (a sender whose stored bytes were not read yet reads them without). */
  dropped(rows: readonly Pick<MessageRow, "sender" | "bytes">[]): void {
    for (const row of rows) if (this.#storedRead.has(row.sender)) this.#move(row.sender, 0, 0, -row.bytes);
  }

  /** A sender's stored bytes, read from the index once every write accepted so far is in the database. */
  #readStored(sender: string): void {
    if (this.#storedRead.has(sender)) return;
    this.flush();
    this.#storedRead.add(sender);
    this.#move(sender, 0, 0, this.#storedStmt.get(sender)?.bytes ?? 0);
  }

  #move(agentId: string, messages: number, bytes: number, stored: number): void {
    const usage = this.#byAgent.get(agentId) ?? { ...NO_USAGE };
    usage.pendingMessages += messages;
    usage.pendingBytes += bytes;
    usage.storedBytes += stored;
    if (usage.pendingMessages <= 0 && usage.pendingBytes <= 0 && usage.storedBytes <= 0) {
      this.#byAgent.delete(agentId);
    } else {
      this.#byAgent.set(agentId, usage);
    }
  }
}
