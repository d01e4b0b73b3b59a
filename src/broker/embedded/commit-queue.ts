import { BrokerError } from "../errors.js";
import type { Warn } from "../policy.js";
import { WriteFailures } from "../write-failures.js";
import { describeWriteFailure, storageError } from "./database.js";
import type { SqliteDatabase, SqliteStatement } from "./sqlite.js";

interface QueuedWrite {
  op: () => unknown;
  afterCommit: ((result: unknown) => void) | undefined;
  resolve: ((result: unknown) => void) | undefined;
  reject: ((error: unknown) => void) | undefined;
}

/**
 * How long a deferred write (delivery bookkeeping) may wait for a commit. A delivery's write is
 * skipped when the ack comes first, and the ack usually comes within milliseconds; so most
 * deliveries under load cost no write and no commit of their own. Losing a deferred write in a
 * crash costs one more delivery after the restart.
 */
export const DEFERRED_WRITE_DELAY_MS = 30;

/**
 * Group commit: writes queued during one turn of the event loop run in a single transaction on the
 * next `setImmediate`, and each caller's promise resolves only after that transaction committed.
 * Durability per write is unchanged; the fsync/WAL cost is shared by the whole batch. Deferred
 * writes, which nobody waits for, are held back up to `DEFERRED_WRITE_DELAY_MS`, or until a read
 * or `close` flushes them.
 *
 * An op may throw a BrokerError (a precondition failed) before it writes anything: only that op's
 * promise rejects and the rest of the batch commits. Any other error aborts the whole batch.
 *
 * Every batch is a write, so the queue is where failed writes (disk full…) are seen: `failures`
 * holds the current run of them for `health()`, until a batch that changed rows commits.
 */
export class CommitQueue {
  readonly failures = new WriteFailures();
  private queue: QueuedWrite[] = [];
  private deferred: QueuedWrite[] = [];
  private deferredTimer: NodeJS.Timeout | null = null;
  private scheduled: NodeJS.Immediate | null = null;
  private closed = false;
  private readonly totalChanges: SqliteStatement<[], { n: number }>;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly warn: Warn,
  ) {
    this.totalChanges = db.prepare("SELECT total_changes() AS n");
  }

  /** Runs `op` in the next batch; `afterCommit` runs synchronously right after the commit, in queue order. */
  run<T>(op: () => T, afterCommit?: (result: T) => void): Promise<T> {
    if (this.closed) return Promise.reject(new BrokerError("closed", "the broker is closed"));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        op,
        afterCommit: afterCommit as ((result: unknown) => void) | undefined,
        resolve: resolve as (result: unknown) => void,
        reject,
      });
      this.schedule();
    });
  }

  /**
   * Runs `op` in a transaction of its own, on a timer of its own (so the event loop handles I/O
   * between it and the writes of the turn it was asked in): for background work that goes on batch
   * after batch (the retention sweep), whose hold of the event loop is then its own and does not
   * lengthen the commit the relay's writes wait for. Refused once closed, as `run` is.
   */
  runAlone<T>(op: () => T, afterCommit?: (result: T) => void): Promise<T> {
    if (this.closed) return Promise.reject(new BrokerError("closed", "the broker is closed"));
    return new Promise<T>((resolve, reject) => {
      setTimeout(() => {
        if (this.closed) {
          reject(new BrokerError("closed", "the broker is closed"));
          return;
        }
        this.commitBatch([
          {
            op,
            afterCommit: afterCommit as ((result: unknown) => void) | undefined,
            resolve: resolve as (result: unknown) => void,
            reject,
          },
        ]);
      }, 0);
    });
  }

  /**
   * A write nobody waits for (delivery bookkeeping), committed within `DEFERRED_WRITE_DELAY_MS` or at
   * the next `flush`; `op` runs then, so it writes the state as it is then. A failure is a warning.
   */
  defer<T>(op: () => T, afterCommit?: (result: T) => void): void {
    if (this.closed) return;
    this.deferred.push({
      op,
      afterCommit: afterCommit as ((result: unknown) => void) | undefined,
      resolve: undefined,
      reject: (error) => this.warn(`deferred write failed: ${String(error)}`),
    });
    this.deferredTimer ??= setTimeout(() => {
      this.deferredTimer = null;
      this.flush();
    }, DEFERRED_WRITE_DELAY_MS);
  }

  /** Commits everything queued so far, deferred writes included, now. */
  flush(): void {
    if (this.deferredTimer) {
      clearTimeout(this.deferredTimer);
      this.deferredTimer = null;
    }
    if (this.deferred.length > 0) {
      this.queue.push(...this.deferred);
      this.deferred = [];
    }
    this.commitDue();
  }

  private commitDue(): void {
    if (this.scheduled) {
      clearImmediate(this.scheduled);
      this.scheduled = null;
    }
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      this.commitBatch(batch);
    }
  }

  /** Flushes and refuses further writes. */
  close(): void {
    this.flush();
    this.closed = true;
  }

  private changes(): number {
    return this.totalChanges.get()?.n ?? 0;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = setImmediate(() => {
      this.scheduled = null;
      this.commitDue();
    });
  }

  private commitBatch(batch: QueuedWrite[]): void {
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: BrokerError }> = [];
    // Only while failing: a batch that changed nothing never reached the disk, so proves nothing.
    const changesBefore = this.failures.current() ? this.changes() : undefined;
    try {
      this.db.transaction(() => {
        for (const write of batch) {
          try {
            outcomes.push({ ok: true, value: write.op() });
          } catch (error) {
            if (!(error instanceof BrokerError)) throw error;
            outcomes.push({ ok: false, error });
          }
        }
      })();
    } catch (error) {
      this.failures.failed(describeWriteFailure(error));
      const failure = storageError(error);
      for (const write of batch) write.reject?.(failure);
      return;
    }
    if (changesBefore !== undefined && this.changes() > changesBefore) this.failures.succeeded();
    batch.forEach((write, index) => {
      const outcome = outcomes[index];
      if (!outcome) return;
      if (outcome.ok) {
        try {
          write.afterCommit?.(outcome.value);
        } catch (error) {
          this.warn(`post-commit step failed: ${String(error)}`);
        }
        write.resolve?.(outcome.value);
      } else {
        write.reject?.(outcome.error);
      }
    });
  }
}
