/**
 * What the handled record costs, and why it is an append-only file: the time per record of the
 * SDK's ledger (`DeliveryLedger.finish`: a write now, one fdatasync per group of records written
 * meanwhile) against SQLite in WAL mode with `synchronous=FULL`, committing each record on its own
 * or K per transaction. K records are in flight at a time, as K handlers settling together.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeliveryLedger } from "../../src/client/ledger.js";

export interface RecordCost {
  store: string;
  inFlight: number;
  microsPerRecord: number;
}

const DAY = 24 * 3_600_000;

export async function measureRecordCosts(records: number, inFlight: number[]): Promise<RecordCost[]> {
  const dir = mkdtempSync(join(tmpdir(), "acp-records-"));
  const costs: RecordCost[] = [];
  try {
    for (const k of inFlight) {
      const ledger = new DeliveryLedger({ retentionMs: DAY, persist: { root: dir, agentId: `ledger-${k}` } });
      await ledger.open();
      costs.push({
        store: "handled.log (group fdatasync)",
        inFlight: k,
        microsPerRecord: await timed(records, k, (id) => ledger.finish(id)),
      });
      await ledger.close();
    }
    const Database = createRequire(import.meta.url)("better-sqlite3") as typeof import("better-sqlite3");
    const db = new Database(join(dir, "records.db"));
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE handled (id TEXT PRIMARY KEY, expires_at INTEGER) WITHOUT ROWID");
    const insert = db.prepare("INSERT OR REPLACE INTO handled VALUES (?, ?)");
    for (const k of inFlight) {
      // better-sqlite3 is synchronous: K records in flight can at best share one transaction.
      const batch = db.transaction((ids: string[]) => {
        for (const id of ids) insert.run(id, Date.now());
      });
      let pending: string[] = [];
      const started = performance.now();
      for (let n = 0; n < records; n++) {
        pending.push(`sqlite-${k}-${n}`);
        if (pending.length === k) {
          batch(pending);
          pending = [];
        }
      }
      if (pending.length > 0) batch(pending);
      costs.push({
        store:
          k === 1
            ? "SQLite WAL, synchronous=FULL, a commit each"
            : "SQLite WAL, synchronous=FULL, K per commit",
        inFlight: k,
        microsPerRecord: Math.round(((performance.now() - started) * 1000) / records),
      });
    }
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return costs;
}

/** µs per record with `k` records in flight at a time. */
async function timed(records: number, k: number, record: (id: string) => Promise<void>): Promise<number> {
  const started = performance.now();
  for (let n = 0; n < records; n += k) {
    const group: Promise<void>[] = [];
    for (let i = n; i < Math.min(records, n + k); i++) group.push(record(`m-${k}-${i}`));
    await Promise.all(group);
  }
  return Math.round(((performance.now() - started) * 1000) / records);
}
