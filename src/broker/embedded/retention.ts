import { type BrokerPolicy, maxDeliveriesDetail, type Warn } from "../policy.js";
import type { CommitQueue } from "./commit-queue.js";
import { type MessageRow, type MessageTable, SWEEP_BATCH, type SweptRow } from "./messages.js";

/** What the sweep tells the broker after each batch has committed. */
export interface SweepHooks {
  /** Envelopes dropped (their senders' stored bytes shrink). */
  dropped(rows: readonly SweptRow[]): void;
  /** A message left queued/delivered: expired, or dead-lettered after its last delivery went unanswered. */
  settled(row: MessageRow): void;
  /** The recipient's inbox is open in this process (it dead-letters its own deliveries). */
  inboxOpen(agentId: string): boolean;
  /**
   * A batch committed: how long it held the event loop, from its first statement to its commit,
   * and how much of that was the sweep's own statements (ms).
   */
  batched?(heldMs: number, sweptMs: number): void;
}

/**
 * Sweeps at most this long in one go, then pauses for PAUSE_MS: a day's worth of envelopes to drop
 * (after an outage, or a shorter retention) goes at a fifth of the event loop, in batches of a few
 * milliseconds, so the relay's commits keep their pace and the loop is never held for long.
 */
const BUSY_MS = 10;
const PAUSE_MS = 40;
/**
 * A batch holds the event loop from its first statement to its commit, and what that costs per row
 * depends on the store (a week-old store's pages are not cached): each batch is sized from how long
 * the last one took per row, aiming at BATCH_MS, between MIN_BATCH and MAX_BATCH rows.
 */
const BATCH_MS = 5;
export const MIN_BATCH = 16;
export const MAX_BATCH = 5_000;
/**
 * A batch works in steps of this many rows and stops after the step that passes BATCH_MS of its own
 * statements: the size from the last batch is a forecast, and one slow step (pages not cached, the
 * machine busy) must not turn a batch of thousands of rows into a hold of a hundred milliseconds.
 */
export const STEP_ROWS = 64;

/**
 * Runs `step` on at most `limit` rows, STEP_ROWS at a time (at least one step), until it reports
 * nothing more due, the rows are used up, or the clock passes `deadline`; whether more may be due.
 */
export function inSteps(limit: number, deadline: number, step: (rows: number) => boolean): boolean {
  for (let left = limit; left > 0; ) {
    const rows = Math.min(STEP_ROWS, left);
    if (!step(rows)) return false;
    left -= rows;
    if (performance.now() >= deadline) break;
  }
  return true;
}

/** The rows of the next batch after one of `rows` rows held the loop for `tookMs`. */
export function nextBatchSize(rows: number, tookMs: number): number {
  // At most doubling per batch: one fast batch (the cache warm, nothing to drop) is no measure.
  const fitting = tookMs > 0 ? Math.floor((rows * BATCH_MS) / tookMs) : MAX_BATCH;
  return Math.max(MIN_BATCH, Math.min(MAX_BATCH, rows * 2, fitting));
}
/** The first sweep after opening: soon, so a backlog due at start is not left for a whole interval. */
const FIRST_SWEEP_MS = 1_000;

/**
 * The embedded broker's retention: envelopes past `retentionMs` are dropped (a message still
 * unsettled then reads `expired`), records past `recordRetentionMs` deleted, and last deliveries
 * out when the process died dead-lettered once their ack wait ended. A sweep starts every
 * `min(ackWait, retention / 10, 60 s)` and goes on, batch by batch, each its own commit, until
 * nothing more is due: so it keeps up with any rate, and a backlog is worked off at once.
 */
export class RetentionSweep {
  private readonly timer: NodeJS.Timeout;
  private readonly first: NodeJS.Timeout;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** Rows per batch, adapted to how long each batch holds the loop (nextBatchSize). */
  private batchRows = SWEEP_BATCH;

  constructor(
    private readonly table: MessageTable,
    private readonly commits: CommitQueue,
    private readonly policy: BrokerPolicy,
    private readonly hooks: SweepHooks,
    private readonly warn: Warn,
  ) {
    const interval = Math.min(
      60_000,
      Math.max(50, Math.floor(Math.min(policy.retentionMs / 10, policy.ackWaitMs))),
    );
    this.timer = setInterval(() => this.sweep(), interval);
    this.timer.unref();
    this.first = setTimeout(() => this.sweep(), Math.min(FIRST_SWEEP_MS, interval));
    this.first.unref();
  }

  /** Starts a sweep unless one is under way; resolves when it is done. */
  sweep(): Promise<void> {
    this.running ??= this.run()
      .catch((error: unknown) => this.warn(`retention sweep failed: ${String(error)}`))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  /** Stops sweeping; resolves once a batch under way has committed. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.first);
    await this.running;
  }

  private async run(): Promise<void> {
    let busySince = performance.now();
    while (!this.stopped && (await this.batch())) {
      if (performance.now() - busySince >= BUSY_MS) {
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
        busySince = performance.now();
      }
    }
  }

  /** One batch, in the next commit; true when more is due. */
  private batch(): Promise<boolean> {
    const now = Date.now();
    const limit = this.batchRows;
    let started = 0;
    let sweptMs = 0;
    // A commit of its own: the batch's hold is its own, and the relay's writes do not wait behind it.
    return this.commits
      .runAlone(
        () => {
          started = performance.now();
          const deadline = started + BATCH_MS;
          const expired: MessageRow[] = [];
          const dropped: SweptRow[] = [];
          const moreToExpire = inSteps(limit, deadline, (rows) => {
            const expiry = this.table.expireThrough(now - this.policy.retentionMs, rows);
            expired.push(...expiry.expired);
            dropped.push(...expiry.dropped);
            return expiry.more;
          });
          let purged = 0;
          const moreToPurge = inSteps(limit, deadline, (rows) => {
            const purge = this.table.purgeThrough(now - this.policy.recordRetentionMs, rows);
            purged += purge.purged;
            return purge.more;
          });
          // Last deliveries out when the process died (a close gives its hand-outs back), whose ack
          // wait has ended while the agent's inbox is not open; open inboxes handle their own.
          const exhausted = this.table
            .exhausted(this.policy.maxDeliver, now)
            .filter((row) => !this.hooks.inboxOpen(row.recipient))
            .map((row) => {
              const detail = maxDeliveriesDetail(row.attempts);
              this.table.markFailed(row, now, "max-deliveries", detail);
              return { ...row, ...failedFields(now, "max-deliveries", detail) };
            });
          sweptMs = performance.now() - started;
          const rows = Math.max(dropped.length, purged);
          return { expired, dropped, exhausted, rows, more: moreToExpire || moreToPurge };
        },
        ({ expired, dropped, exhausted, rows, more }) => {
          // Measured to the commit (this runs right after it); sized only from a full batch, by
          // the rows it did (the clock may have ended it before its size).
          const heldMs = performance.now() - started;
          if (more) this.batchRows = nextBatchSize(Math.max(rows, MIN_BATCH), heldMs);
          this.hooks.batched?.(heldMs, sweptMs);
          this.hooks.dropped(dropped);
          for (const row of expired) this.hooks.settled({ ...row, status: "expired" });
          for (const row of exhausted) this.hooks.settled(row);
        },
      )
      .then((result) => result.more);
  }
}

/** The fields a dead-lettered (failed) row gets. */
export function failedFields(
  now: number,
  reason: "max-deliveries" | "rejected",
  detail: string,
): Partial<MessageRow> {
  return {
    status: "failed",
    failed_at: now,
    next_attempt_at: null,
    last_error: detail,
    dead_letter_reason: reason,
    dead_letter_detail: detail,
  };
}
