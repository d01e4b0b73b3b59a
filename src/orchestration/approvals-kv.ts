import { isBrokerError } from "../broker/errors.js";
import type { Broker, KvBucket, Unsubscribe } from "../broker/index.js";
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

export const APPROVALS_BUCKET = "approvals";
/** A KV watch wakes waiters at once; the poll only backs up a missed event. */
const POLL_MS = 5_000;

/**
 * Approvals in the broker's KV (bucket `approvals`): what the gateway uses, so they survive a
 * gateway restart and are shared by every gateway on one NATS. Decisions are compare-and-set on
 * the record's revision: two approvers racing cannot both win.
 */
export class KvApprovalStore implements ApprovalStore {
  private readonly bucket: KvBucket<ApprovalRecord>;
  private readonly changes = new ChangeSignal();
  private unwatch: Unsubscribe | undefined;
  private watching: Promise<void> | undefined;

  constructor(broker: Broker) {
    this.bucket = broker.kv<ApprovalRecord>(APPROVALS_BUCKET);
  }

  async create(input: NewApproval): Promise<ApprovalRecord> {
    const record = newApprovalRecord(input);
    await this.bucket.create(record.id, record);
    return record;
  }

  async get(id: string): Promise<ApprovalRecord | null> {
    if (!isKey(id)) return null;
    for (;;) {
      const entry = await this.bucket.get(id);
      if (!entry) return null;
      const record = ApprovalRecord.parse(entry.value);
      if (!isOverdue(record)) return record;
      const next = expired(record);
      if (await this.swap(id, next, entry.revision)) return next;
    }
  }

  async list(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
    const records: ApprovalRecord[] = [];
    const cutoff = Date.now() - DECIDED_RETENTION_MS;
    for (const key of await this.bucket.keys()) {
      const record = await this.get(key);
      if (!record) continue;
      if (record.decidedAt !== undefined && Date.parse(record.decidedAt) < cutoff) {
        await this.bucket.delete(key);
        continue;
      }
      if (matches(record, filter)) records.push(record);
    }
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async decide(id: string, decision: ApprovalDecision): Promise<ApprovalRecord> {
    for (;;) {
      const entry = isKey(id) ? await this.bucket.get(id) : null;
      if (!entry) throw notFound(id);
      const { next, error } = applyDecision(ApprovalRecord.parse(entry.value), decision);
      if (next && !(await this.swap(id, next, entry.revision))) continue;
      if (error) throw error;
      return next!;
    }
  }

  async waitForDecision(id: string, signal?: AbortSignal): Promise<ApprovalRecord> {
    await this.watch();
    return waitUntilDecided(
      id,
      (key) => this.get(key),
      (ms, s) => this.changes.next(ms, s),
      POLL_MS,
      signal,
    );
  }

  async close(): Promise<void> {
    await this.watching;
    this.unwatch?.();
    this.unwatch = undefined;
    this.changes.notify();
  }

  private watch(): Promise<void> {
    this.watching ??= this.bucket
      .watch(() => this.changes.notify())
      .then((unwatch) => {
        this.unwatch = unwatch;
      });
    return this.watching;
  }

  /** Compare-and-set; false when someone else changed the record first (the caller re-reads). */
  private async swap(id: string, next: ApprovalRecord, revision: number): Promise<boolean> {
    try {
      await this.bucket.update(id, next, revision);
      return true;
    } catch (err) {
      if (isBrokerError(err, "conflict")) return false;
      throw err;
    }
  }
}

/** Ids are UUIDs; anything else cannot be a key and simply does not exist. */
function isKey(id: string): boolean {
  return /^[A-Za-z0-9_=/-][A-Za-z0-9_=/.-]{0,255}$/.test(id) && !id.endsWith(".");
}
