import { randomUUID } from "node:crypto";
import { statfs } from "node:fs/promises";
import { resolve } from "node:path";
import { BrokerError } from "../errors.js";
import { Listeners } from "../listeners.js";
import {
  type BrokerPolicy,
  DEFAULT_LIST_LIMIT,
  DEFAULT_MAX_IN_FLIGHT,
  effectiveStatus,
  resolvePolicy,
  type Warn,
  warner,
} from "../policy.js";
import { envelopeBytes, type ResolvedQuotas, resolveQuotas } from "../quotas.js";
import type {
  AgentUsage,
  Broker,
  BrokerEvent,
  BrokerHealth,
  Delivery,
  EmbeddedBrokerOptions,
  Inbox,
  InboxOptions,
  KvBucket,
  ListPage,
  ListQuery,
  MessageRecord,
  MessageRef,
  RoutedReceiver,
  StoredMessage,
  SubmitInput,
  SubmitResult,
  Unsubscribe,
} from "../types.js";
import {
  checkAgentId,
  checkListQuery,
  checkMessageId,
  checkMessageRef,
  checkSubmit,
  decodeCursor,
  encodeCursor,
  instanceOfRoute,
} from "../validation.js";
import { CommitQueue } from "./commit-queue.js";
import { DEFAULT_DATA_DIR, openDatabase } from "./database.js";
import { StorageHealth } from "./health.js";
import { EmbeddedInbox, type InboxHost } from "./inbox.js";
import { KvStore } from "./kv.js";
import { type LoadedMessage, type MessageRow, MessageTable, toRecord, toStoredMessage } from "./messages.js";
import { failedFields, RetentionSweep } from "./retention.js";
import type { SqliteDatabase } from "./sqlite.js";
import { EmbeddedRouted, ReplyRoutes, type RoutedHost } from "./routed.js";
import {
  EmbeddedSettlement,
  type HandOutHolder,
  type Settlement,
  type SettlementHost,
} from "./settlement.js";
import { UsageCounters } from "./usage.js";

/** The single-process broker: one SQLite file, group-committed writes, redelivery timers in memory. */
export class EmbeddedBroker implements Broker, InboxHost, RoutedHost, SettlementHost {
  readonly kind = "embedded" as const;
  /** SQLite stores any envelope the gateway accepts: no limit of its own. */
  readonly maxEnvelopeBytes = Number.POSITIVE_INFINITY;
  readonly policy: BrokerPolicy;
  readonly ackWaitMs: number;
  readonly table: MessageTable;
  readonly commits: CommitQueue;
  private readonly kvStore: KvStore;
  private readonly storageHealth: StorageHealth;
  private readonly inboxes = new Map<string, EmbeddedInbox>();
  private readonly routed = new Map<string, EmbeddedRouted>();
  private readonly replyRoutes = new ReplyRoutes();
  private readonly settlement: EmbeddedSettlement = new EmbeddedSettlement(this);
  /** The only instance on its database; a new id per process, so routes die with it. */
  readonly instanceId = randomUUID();
  private readonly listeners: Listeners<BrokerEvent>;
  private readonly retention: RetentionSweep;
  /** Quota usage, kept only while quotas are set. */
  readonly counters: UsageCounters | undefined;
  private lastQueuedAt: number;
  private closed = false;

  /**
   * Opens (creating it if need be) the SQLite database in `data` (default `.acp`) and starts the
   * redelivery and retention timers; one process only may open a data directory.
   */
  static open(options: EmbeddedBrokerOptions = {}): EmbeddedBroker {
    const policy = resolvePolicy(options);
    const quotas = resolveQuotas(options.quotas);
    const warn = warner(options, "acp broker");
    const dataDir = resolve(options.data ?? DEFAULT_DATA_DIR);
    const db = openDatabase(dataDir, options.synchronous ?? "normal", warn);
    return new EmbeddedBroker(db, dataDir, policy, warn, quotas);
  }

  private constructor(
    private readonly db: SqliteDatabase,
    private readonly dataDir: string,
    policy: BrokerPolicy,
    private readonly warn: Warn,
    quotas: ResolvedQuotas | undefined,
  ) {
    this.policy = policy;
    this.ackWaitMs = policy.ackWaitMs;
    this.listeners = new Listeners(warn);
    this.table = new MessageTable(db);
    this.commits = new CommitQueue(db, warn);
    this.storageHealth = new StorageHealth(db, this.commits);
    this.kvStore = new KvStore(db, this.commits, warn, (change) => {
      if (this.listeners.size > 0) {
        this.listeners.emit({
          type: "kv",
          bucket: change.bucket,
          key: change.key,
          op: change.op,
          value: change.value,
        });
      }
    });
    this.lastQueuedAt = this.table.latestQueuedAt();
    this.counters = quotas && UsageCounters.load(db, quotas, () => this.commits.flush());
    this.retention = new RetentionSweep(
      this.table,
      this.commits,
      policy,
      {
        dropped: (rows) => this.counters?.dropped(rows),
        settled: (row) => {
          this.counters?.settled(row);
          this.statusChanged(row);
        },
        inboxOpen: (agentId) => this.inboxes.has(agentId),
      },
      warn,
    );
  }

  async submit(input: SubmitInput): Promise<SubmitResult> {
    this.assertOpen();
    checkSubmit(input);
    const bytes = envelopeBytes(input.envelope);
    const counted = this.counters?.count(input, bytes, this.table) ?? false;
    const stored = this.commits.run(
      () => {
        // queued_at never decreases with seq: the retention sweeps rely on it.
        this.lastQueuedAt = Math.max(Date.now(), this.lastQueuedAt);
        const inserted = this.table.insert(input, this.lastQueuedAt, bytes);
        if (inserted) return { row: inserted, inserted, duplicate: false };
        // The same sender's id again (another sender's id is another message).
        return { row: this.table.byRef(input)!, inserted: undefined, duplicate: true };
      },
      (result) => {
        if (result.duplicate) {
          if (counted) this.counters?.uncount(input, bytes);
          return;
        }
        this.statusChanged(result.row);
        if (result.inserted) this.offer(result.inserted, input);
      },
    );
    const { row, duplicate } = await stored.catch((error: unknown) => {
      if (counted) this.counters?.uncount(input, bytes);
      throw error;
    });
    // A new message is reported as stored (queued), even if its inbox already picked it up.
    const status = duplicate ? effectiveStatus(this.policy, row.status, row.queued_at, Date.now()) : "queued";
    return { id: input.id, status, duplicate };
  }

  /** A message just committed: to its route's receiver, or its recipient's inbox. */
  private offer(row: LoadedMessage, input: SubmitInput): void {
    if (input.replyTo) this.replyRoutes.remember(input);
    const route = input.route ?? this.replyRoutes.take(input);
    const receiver = route && instanceOfRoute(route) === this.instanceId && this.routed.get(row.recipient);
    if (route && receiver) receiver.offer(row, route);
    else this.inboxes.get(row.recipient)?.offer(row);
  }

  async openInbox(agentId: string, options: InboxOptions = {}): Promise<Inbox> {
    this.assertOpen();
    checkAgentId(agentId);
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
      throw new BrokerError("invalid_argument", "maxInFlight must be a positive integer", {
        field: "maxInFlight",
      });
    }
    if (this.inboxes.has(agentId)) {
      throw new BrokerError("invalid_state", `the inbox of ${agentId} is already open in this broker`);
    }
    // Pending writes (recent submits) must be visible to the first page read.
    this.commits.flush();
    const inbox = new EmbeddedInbox(agentId, maxInFlight, this);
    this.inboxes.set(agentId, inbox);
    inbox.start();
    return inbox;
  }

  receiveRouted(agentId: string, deliver: (delivery: Delivery) => void): RoutedReceiver {
    this.assertOpen();
    checkAgentId(agentId);
    if (this.routed.has(agentId)) {
      throw new BrokerError("invalid_state", `the routed deliveries of ${agentId} already have a receiver`);
    }
    const receiver = new EmbeddedRouted(agentId, deliver, this);
    this.routed.set(agentId, receiver);
    return receiver;
  }

  ack(agentId: string, message: MessageRef): Promise<MessageRecord> {
    return this.settle(agentId, message, { action: "ack" });
  }

  async working(agentId: string, message: MessageRef): Promise<void> {
    this.assertOpen();
    checkAgentId(agentId);
    checkMessageRef(message);
    this.settlement.working(agentId, message);
  }

  private async settle(agentId: string, message: MessageRef, settlement: Settlement): Promise<MessageRecord> {
    this.assertOpen();
    checkAgentId(agentId);
    checkMessageRef(message);
    return this.settlement.settle(agentId, message, settlement);
  }

  reject(agentId: string, message: MessageRef, reason: string): Promise<MessageRecord> {
    if (typeof reason !== "string" || reason.length === 0 || reason.length > 1024) {
      return Promise.reject(
        new BrokerError("invalid_argument", "reject: reason must be 1-1024 characters", { field: "reason" }),
      );
    }
    return this.settle(agentId, message, { action: "reject", detail: `rejected by recipient: ${reason}` });
  }

  async usage(agentId: string): Promise<AgentUsage> {
    this.assertOpen();
    checkAgentId(agentId);
    return this.counters?.usage(agentId) ?? { pendingMessages: 0, pendingBytes: 0, storedBytes: 0 };
  }

  async status(message: MessageRef): Promise<MessageRecord | null> {
    this.assertOpen();
    checkMessageRef(message);
    this.commits.flush(); // read your own writes: delivery bookkeeping is committed lazily
    const row = this.table.byRef(message);
    return row ? toRecord(row, this.policy, Date.now()) : null;
  }

  async get(message: MessageRef): Promise<StoredMessage | null> {
    this.assertOpen();
    checkMessageRef(message);
    this.commits.flush();
    const row = this.table.byRef(message);
    return row ? toStoredMessage(row, this.table.envelope(row.seq), this.policy, Date.now()) : null;
  }

  async sendersTo(recipient: string, id: string): Promise<string[]> {
    this.assertOpen();
    checkAgentId(recipient);
    checkMessageId(id);
    this.commits.flush();
    return this.table.sendersTo(recipient, id);
  }

  async list(query: ListQuery): Promise<ListPage> {
    this.assertOpen();
    checkListQuery(query);
    const limit = query.limit ?? DEFAULT_LIST_LIMIT;
    this.commits.flush();
    const now = Date.now();
    const rows = this.table.list(query, decodeCursor(query.cursor), limit + 1, now - this.policy.retentionMs);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map((row) => toRecord(row, this.policy, now)),
      nextCursor: rows.length > limit && last ? encodeCursor(last.seq) : null,
    };
  }

  kv<T = unknown>(bucket: string): KvBucket<T> {
    this.assertOpen();
    return this.kvStore.bucket<T>(bucket);
  }

  async events(handler: (event: BrokerEvent) => void): Promise<Unsubscribe> {
    this.assertOpen();
    return this.listeners.add(handler);
  }

  async storageRoom(): Promise<number | null> {
    this.assertOpen();
    const { bavail, bsize } = await statfs(this.dataDir);
    return bavail * bsize;
  }

  async health(): Promise<BrokerHealth> {
    if (this.closed) return { ok: false, detail: { storage: "closed" } };
    return this.storageHealth.check();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.retention.stop();
    await Promise.all([...this.routed.values()].map((receiver) => receiver.close()));
    await Promise.all([...this.inboxes.values()].map((inbox) => inbox.close()));
    this.commits.close();
    this.closed = true;
    this.listeners.clear();
    this.db.close();
  }

  // InboxHost

  statusChanged(row: MessageRow): void {
    if (this.listeners.size > 0) {
      this.listeners.emit({ type: "message.status", message: toRecord(row, this.policy, Date.now()) });
    }
  }

  deadLetter(row: LoadedMessage, detail: string): void {
    const now = Date.now();
    Object.assign(row, failedFields(now, "max-deliveries", detail));
    this.commits
      .run(
        () => this.table.markFailed(row, now, "max-deliveries", detail),
        (applied) => {
          if (!applied) return;
          this.counters?.settled(row);
          this.statusChanged(row);
        },
      )
      .catch((error: unknown) => this.warn(`dead-letter write failed: ${String(error)}`));
  }

  released(holder: EmbeddedInbox | EmbeddedRouted): void {
    const holders: Map<string, EmbeddedInbox | EmbeddedRouted> =
      holder instanceof EmbeddedInbox ? this.inboxes : this.routed;
    if (holders.get(holder.agentId) === holder) holders.delete(holder.agentId);
  }

  isRouted(row: LoadedMessage): boolean {
    return this.routed.get(row.recipient)?.holds(row) ?? false;
  }

  requeue(agentId: string, rows: readonly LoadedMessage[]): void {
    this.inboxes.get(agentId)?.requeue(rows);
  }

  holdersOf(agentId: string): HandOutHolder[] {
    const holders: HandOutHolder[] = [];
    const inbox = this.inboxes.get(agentId);
    const routed = this.routed.get(agentId);
    if (inbox) holders.push(inbox);
    if (routed) holders.push(routed);
    return holders;
  }

  private assertOpen(): void {
    if (this.closed) throw new BrokerError("closed", "the broker is closed");
  }
}
