import type { BrokerHealth } from "../types.js";
import type { CommitQueue } from "./commit-queue.js";
import type { SqliteDatabase, SqliteStatement } from "./sqlite.js";

/**
 * The embedded broker's health: degraded from the first failed write (disk full, I/O error,
 * read-only file…) until a write succeeds again.
 *
 * While healthy it only reads (`SELECT 1`): a health check costs nothing, and a full disk shows from
 * the first write it refuses. While degraded each check tries one write of its own, because a
 * gateway a load balancer has taken out of service gets no writes that could clear the failure.
 * That write must be committed: a rolled-back one never leaves SQLite's page cache, so it succeeds
 * on a full disk. It is one row (`meta.health_probe_at`, the time of the last probe), committed with
 * whatever else is queued, and only while degraded.
 */
export class StorageHealth {
  private readonly probe: SqliteStatement<[number]>;
  private readonly read: SqliteStatement;

  constructor(
    db: SqliteDatabase,
    private readonly commits: CommitQueue,
  ) {
    this.probe = db.prepare(
      `INSERT INTO meta (name, value) VALUES ('health_probe_at', ?)
       ON CONFLICT(name) DO UPDATE SET value = excluded.value`,
    );
    this.read = db.prepare("SELECT 1");
  }

  async check(): Promise<BrokerHealth> {
    if (this.commits.failures.current()) {
      // A failure is recorded by the queue itself; the rejection carries nothing more.
      await this.commits.run(() => this.probe.run(Date.now())).catch(() => undefined);
    }
    const failure = this.commits.failures.current();
    if (failure) {
      return { ok: false, detail: { storage: failure.cause, since: new Date(failure.since).toISOString() } };
    }
    try {
      this.read.get();
      // No path: /healthz is public, and where the data lives is the operator's business.
      return { ok: true, detail: { storage: "sqlite" } };
    } catch (error) {
      return { ok: false, detail: { storage: `read failed: ${String(error)}` } };
    }
  }
}
