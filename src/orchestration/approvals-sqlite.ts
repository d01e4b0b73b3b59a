import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import type Database from "better-sqlite3";
import {
  type ApprovalDecision,
  type ApprovalFilter,
  ApprovalRecord,
  type ApprovalStore,
  applyDecision,
  ChangeSignal,
  DECIDED_RETENTION_MS,
  expired,
  isOverdue,
  matches,
  type NewApproval,
  newApprovalRecord,
  notFound,
  waitUntilDecided,
} from "./approvals.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS approvals (
  id TEXT PRIMARY KEY,
  status TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  decided_at TEXT,
  record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals(status, created_at);
`;

/**
 * Approvals in a local SQLite file, for an orchestrator that runs without a gateway. Several
 * processes share the file (the orchestrator waiting, `acp approvals --store FILE` deciding): WAL
 * mode, a busy timeout, and every decision a compare-and-set in one transaction. Other processes'
 * decisions are seen by polling (`pollMs`, default 250 ms); this process's own at once.
 */
export class SqliteApprovalStore implements ApprovalStore {
  private readonly changes = new ChangeSignal();

  private constructor(
    private readonly db: Database.Database,
    private readonly pollMs: number,
  ) {}

  /**
   * Opens (creating it if need be) an approvals database file; `waitForDecision` polls it every `pollMs`, so
   * several processes may share the file.
   */
  static open(file: string, options: { pollMs?: number } = {}): SqliteApprovalStore {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    // Loaded on first use: `acp-kit/orchestration` does not load SQLite's native module unless asked.
    const Sqlite = createRequire(import.meta.url)("better-sqlite3") as typeof Database;
    const db = new Sqlite(file);
    db.pragma("journal_mode = WAL");
    db.pragma("busy_timeout = 5000");
    db.exec(SCHEMA);
    return new SqliteApprovalStore(db, options.pollMs ?? 250);
  }

  async create(input: NewApproval): Promise<ApprovalRecord> {
    const record = newApprovalRecord(input);
    this.db
      .prepare("INSERT INTO approvals (id, status, requested_by, created_at, record) VALUES (?, ?, ?, ?, ?)")
      .run(record.id, record.status, record.requestedBy, record.createdAt, JSON.stringify(record));
    return record;
  }

  async get(id: string): Promise<ApprovalRecord | null> {
    return this.db
      .transaction(() => {
        const record = this.read(id);
        if (!record || !isOverdue(record)) return record;
        const next = expired(record);
        this.write(next);
        return next;
      })
      .immediate();
  }

  async list(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
    const cutoff = new Date(Date.now() - DECIDED_RETENTION_MS).toISOString();
    this.db.prepare("DELETE FROM approvals WHERE decided_at IS NOT NULL AND decided_at < ?").run(cutoff);
    const ids = this.db
      .prepare<[], { id: string }>("SELECT id FROM approvals ORDER BY created_at, id")
      .all()
      .map((row) => row.id);
    const records: ApprovalRecord[] = [];
    for (const id of ids) {
      const record = await this.get(id);
      if (record && matches(record, filter)) records.push(record);
    }
    return records;
  }

  async decide(id: string, decision: ApprovalDecision): Promise<ApprovalRecord> {
    const next = this.db
      .transaction(() => {
        const record = this.read(id);
        if (!record) throw notFound(id);
        const outcome = applyDecision(record, decision);
        if (outcome.next) this.write(outcome.next);
        return outcome;
      })
      .immediate();
    this.changes.notify();
    if (next.error) throw next.error;
    return next.next!;
  }

  waitForDecision(id: string, signal?: AbortSignal): Promise<ApprovalRecord> {
    return waitUntilDecided(
      id,
      (key) => this.get(key),
      (ms, s) => this.changes.next(ms, s),
      this.pollMs,
      signal,
    );
  }

  async close(): Promise<void> {
    this.changes.notify();
    if (this.db.open) this.db.close();
  }

  private read(id: string): ApprovalRecord | null {
    const row = this.db
      .prepare<[string], { record: string }>("SELECT record FROM approvals WHERE id = ?")
      .get(id);
    return row ? ApprovalRecord.parse(JSON.parse(row.record)) : null;
  }

  private write(record: ApprovalRecord): void {
    this.db
      .prepare("UPDATE approvals SET status = ?, decided_at = ?, record = ? WHERE id = ?")
      .run(record.status, record.decidedAt ?? null, JSON.stringify(record), record.id);
  }
}
