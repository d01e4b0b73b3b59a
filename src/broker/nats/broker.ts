import { randomUUID } from "node:crypto";
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_PRIORITY, type Priority, priorityOfRank } from "../../protocol/priority.js";
import { BrokerError } from "../errors.js";
import {
  type BrokerPolicy,
  DEFAULT_LIST_LIMIT,
  DEFAULT_MAX_IN_FLIGHT,
  resolvePolicy,
  noticer,
  type Warn,
  warner,
} from "../policy.js";
import { resolveQuotas } from "../quotas.js";
import { buildRecord } from "../records.js";
import type {
  AgentUsage,
  Broker,
  BrokerEvent,
  BrokerHealth,
  Delivery,
  Inbox,
  InboxOptions,
  KvBucket,
  ListPage,
  ListQuery,
  MessageRecord,
  MessageRef,
  NatsBrokerOptions,
  RoutedReceiver,
  StoredMessage,
  SubmitInput,
  SubmitResult,
  Unsubscribe,
} from "../types.js";
import {
  checkAgentId,
  checkBucketName,
  checkListQuery,
  checkMessageId,
  checkMessageRef,
  checkSubmit,
  instanceOfRoute,
} from "../validation.js";
import { ChangeFeed } from "./change-feed.js";
import { connectNats, patientSetUp } from "./connection.js";
import { NatsHealth } from "./health.js";
import { type InboxesHost, NatsInboxes } from "./inboxes.js";
import { NatsBucket } from "./kv.js";
import {
  bucketOptions,
  ensureBucketTtl,
  ensureStreams,
  Header,
  INBOX_STREAM,
  STATUS_BUCKET,
} from "./layout.js";
import { LegacyIndex } from "./legacy-index.js";
import { listMessages } from "./listing.js";
import { MaxAgeLowering } from "./max-age.js";
import { Orphans } from "./orphans.js";
import { RoutedDeliveries } from "./routed.js";
import { Settlement } from "./settlement.js";
import { StreamPublisher } from "./publisher.js";
import { type StatusDoc, StatusStore } from "./status-store.js";
import { checkEnvelopeSize, maxEnvelopeBytes, storeMessage } from "./submission.js";
import { DEFAULT_MAX_PENDING_SUBMITS, DEFAULT_SUBMIT_STALL_MS, SubmitAdmission } from "./submit-admission.js";
import { UsageLedger } from "./usage-ledger.js";

/** How long `close` lets the connection drain before closing it outright. */
const DRAIN_TIMEOUT_MS = 2_000;

/**
 * The broker on NATS JetStream. Every gateway process connected to the same NATS shares the
 * streams, consumers and buckets, so a message submitted at one gateway reaches an inbox open at another.
 */
export class NatsBroker implements Broker, InboxesHost {
  readonly kind = "nats" as const;
  private readonly inboxes: NatsInboxes;
  private readonly changes: ChangeFeed;
  private readonly healthCheck: NatsHealth;
  private readonly orphans: Orphans;
  private readonly settlement: Settlement;
  private readonly routes: RoutedDeliveries;
  /** This broker (gateway process) among all on the same NATS: the holder of its hand-outs. */
  readonly instanceId = randomUUID();
  private closed = false;

  /**
   * Connects to NATS and creates (or finds) the streams and buckets of the layout; a server it cannot
   * reach or set up is a BrokerError `unavailable`.
   */
  static async open(options: NatsBrokerOptions): Promise<NatsBroker> {
    const policy = resolvePolicy(options);
    const admission = new SubmitAdmission(
      options.nats.maxPendingSubmits ?? DEFAULT_MAX_PENDING_SUBMITS,
      options.nats.submitStallMs ?? DEFAULT_SUBMIT_STALL_MS,
    );
    const replicas = options.nats.replicas ?? 1;
    if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5) {
      throw new BrokerError("invalid_argument", "nats.replicas must be an integer from 1 to 5", {
        field: "nats.replicas",
      });
    }
    const nc = await connectNats(options.nats);
    const warn = warner(options, "acp broker (nats)");
    try {
      const jsm = await jetstreamManager(nc);
      const kvm = new Kvm(nc);
      const quotas = resolveQuotas(options.quotas);
      const { lowerings, legacyIndex, statusKv, ledger } = await patientSetUp(async () => {
        const lowerings = await ensureStreams(jsm, policy, replicas);
        const legacyIndex = await LegacyIndex.open(jsm);
        const statusKv = await kvm.create(STATUS_BUCKET, {
          ...bucketOptions(STATUS_BUCKET, replicas),
          ttl: policy.recordRetentionMs,
        });
        lowerings.push(...(await ensureBucketTtl(jsm, STATUS_BUCKET, policy.recordRetentionMs)));
        const ledger = quotas && (await UsageLedger.open(kvm, replicas, quotas, policy, warn));
        return { lowerings, legacyIndex, statusKv, ledger };
      }, warn);
      const publisher = new StreamPublisher(nc);
      // Last, once nothing else can fail; on a connection of its own, since the expiry runs inside its requests.
      const maxAge =
        lowerings.length > 0
          ? new MaxAgeLowering(
              lowerings,
              () => connectNats({ ...options.nats, name: `${options.nats.name ?? "acp-broker"} max-age` }),
              { notice: noticer(options, "acp broker (nats)"), warn },
            )
          : undefined;
      return new NatsBroker(
        nc,
        jsm,
        jetstream(nc),
        kvm,
        publisher,
        new StatusStore(statusKv, publisher),
        legacyIndex,
        policy,
        replicas,
        admission,
        warn,
        ledger,
        maxAge,
      );
    } catch (error) {
      await nc.close();
      throw error instanceof BrokerError
        ? error
        : new BrokerError("unavailable", `cannot set up JetStream: ${String(error)}`, { cause: error });
    }
  }

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    readonly js: JetStreamClient,
    private readonly kvm: Kvm,
    private readonly publisher: StreamPublisher,
    readonly statuses: StatusStore,
    /** The index stream of brokers made before the shards, while it holds entries (legacy-index.ts). */
    private readonly legacyIndex: LegacyIndex,
    readonly policy: BrokerPolicy,
    private readonly replicas: number,
    private readonly admission: SubmitAdmission,
    readonly warn: Warn,
    /** Quota usage, kept only while quotas are set. */
    readonly ledger: UsageLedger | undefined,
    /** A stream's max_age being lowered after start (max-age.ts), if any. */
    private readonly maxAge: MaxAgeLowering | undefined,
  ) {
    this.changes = new ChangeFeed(nc, policy, warn);
    this.healthCheck = new NatsHealth(nc, publisher.failures);
    this.orphans = new Orphans(nc, jsm, statuses, this.instanceId, warn);
    this.inboxes = new NatsInboxes(nc, jsm, js, policy, this.orphans, this);
    this.settlement = new Settlement(
      nc,
      publisher,
      statuses,
      policy,
      (agentId) => this.inboxes.get(agentId),
      (agentId) => this.routes.receiverOf(agentId),
      (doc) => this.pendingSettled(doc),
    );
    this.routes = new RoutedDeliveries(
      nc,
      statuses,
      policy,
      this.instanceId,
      (seq) => this.storedAt(seq),
      warn,
    );
  }

  /** How long a delivery waits for its acknowledgement before it is redelivered. */
  get ackWaitMs(): number {
    return this.policy.ackWaitMs;
  }

  /** The server's `max_payload` (from the connected server's INFO) minus room for the headers. */
  get maxEnvelopeBytes(): number {
    return maxEnvelopeBytes(this.nc.info?.max_payload);
  }

  submit(submitted: SubmitInput): Promise<SubmitResult> {
    return this.guard(async () => {
      checkSubmit(submitted);
      checkEnvelopeSize(submitted.envelope, this.nc.info?.max_payload);
      const input = await this.withRoute(submitted);
      const queuedAt = Date.now();
      // The inbox's status write for this id waits for the record written here (see StatusStore.lock).
      const store = (usageBytes: number | undefined) =>
        this.admission.run(() =>
          this.statuses.lock(input, () =>
            storeMessage(this.publisher, this.statuses, this.policy, input, queuedAt, usageBytes),
          ),
        );
      const result = await (this.ledger
        ? this.ledger.submit(input, queuedAt, async () => (await this.statuses.read(input)) !== null, store)
        : store(undefined));
      if (input.route && !result.duplicate) this.routes.routed(input.to, input, input.route);
      return result;
    });
  }

  /** The input with its route settled: given, or the `replyTo` of the message it answers. */
  private async withRoute(input: SubmitInput): Promise<SubmitInput> {
    const { inReplyTo, route: given, ...rest } = input;
    let route = given;
    if (!route && inReplyTo) {
      const asked = await this.statuses.recentOrRead({ from: input.to, id: inReplyTo });
      if (asked?.from === input.to && asked.to === input.from) route = asked.replyTo;
    }
    // A route of this instance with no receiver here would only hold the message up.
    if (!route || (instanceOfRoute(route) === this.instanceId && !this.routes.has(input.to))) return rest;
    return { ...rest, route };
  }

  receiveRouted(agentId: string, deliver: (delivery: Delivery) => void): RoutedReceiver {
    if (this.closed) throw new BrokerError("closed", "the broker is closed");
    checkAgentId(agentId);
    if (this.routes.has(agentId)) {
      throw new BrokerError("invalid_state", `the routed deliveries of ${agentId} already have a receiver`);
    }
    return this.routes.receive(agentId, deliver);
  }

  usage(agentId: string): Promise<AgentUsage> {
    return this.guard(async () => {
      checkAgentId(agentId);
      return this.ledger?.usage(agentId) ?? { pendingMessages: 0, pendingBytes: 0, storedBytes: 0 };
    });
  }

  openInbox(agentId: string, options: InboxOptions = {}): Promise<Inbox> {
    return this.guard(async () => {
      checkAgentId(agentId);
      const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
      if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
        throw new BrokerError("invalid_argument", "maxInFlight must be a positive integer", {
          field: "maxInFlight",
        });
      }
      return this.inboxes.open(agentId, maxInFlight);
    });
  }

  ack(agentId: string, message: MessageRef): Promise<MessageRecord> {
    return this.settle(agentId, message, "ack", "");
  }

  private settle(agentId: string, message: MessageRef, action: "ack" | "reject", detail: string) {
    return this.guard(async () => {
      checkAgentId(agentId);
      checkMessageRef(message);
      return this.settlement.settle(agentId, message, action, detail);
    });
  }

  working(agentId: string, message: MessageRef): Promise<void> {
    return this.guard(async () => {
      checkAgentId(agentId);
      checkMessageRef(message);
      await this.settlement.working(agentId, message);
    });
  }

  reject(agentId: string, message: MessageRef, reason: string): Promise<MessageRecord> {
    if (typeof reason !== "string" || reason.length === 0 || reason.length > 1024) {
      return Promise.reject(
        new BrokerError("invalid_argument", "reject: reason must be 1-1024 characters", { field: "reason" }),
      );
    }
    return this.settle(agentId, message, "reject", `rejected by recipient: ${reason}`);
  }

  status(message: MessageRef): Promise<MessageRecord | null> {
    return this.guard(async () => {
      checkMessageRef(message);
      const current = await this.statuses.read(message);
      return current ? buildRecord(current.value, this.policy, Date.now()) : null;
    });
  }

  get(message: MessageRef): Promise<StoredMessage | null> {
    return this.guard(async () => {
      checkMessageRef(message);
      const current = await this.statuses.read(message);
      if (!current) return null;
      const now = Date.now();
      const record = buildRecord(current.value, this.policy, now);
      if (record.expiredAt !== undefined) return { ...record, envelope: null };
      return { ...record, envelope: await this.envelopeAt(current.value.seq) };
    });
  }

  private async envelopeAt(seq: number): Promise<string | null> {
    return (await this.storedAt(seq))?.envelope ?? null;
  }

  /** The stored envelope at `seq` and its priority (null once retention removed it). */
  private async storedAt(seq: number): Promise<{ envelope: string; priority: Priority } | null> {
    // With replicas a direct get may be answered by a follower that has not stored it yet: ask the leader.
    const stored =
      this.replicas > 1
        ? await this.jsm.streams.getMessage(INBOX_STREAM, { seq })
        : await this.jsm.direct.getMessage(INBOX_STREAM, { seq });
    if (!stored) return null;
    const rank = stored.header?.get(Header.Priority);
    return { envelope: stored.string(), priority: rank ? priorityOfRank(Number(rank)) : DEFAULT_PRIORITY };
  }

  sendersTo(recipient: string, id: string): Promise<string[]> {
    return this.guard(async () => {
      checkAgentId(recipient);
      checkMessageId(id);
      return this.statuses.sendersTo(recipient, id);
    });
  }

  list(query: ListQuery): Promise<ListPage> {
    return this.guard(async () => {
      checkListQuery(query);
      return listMessages(
        this.jsm,
        this.statuses,
        this.legacyIndex,
        this.policy,
        query,
        query.limit ?? DEFAULT_LIST_LIMIT,
      );
    });
  }

  kv<T = unknown>(bucket: string): KvBucket<T> {
    checkBucketName(bucket);
    return new NatsBucket<T>(bucket, this.kvm, this.replicas, (work) => this.guard(work), this.warn);
  }

  events(handler: (event: BrokerEvent) => void): Promise<Unsubscribe> {
    return this.guard(() => this.changes.add(handler));
  }

  storageRoom(): Promise<number | null> {
    return this.guard(async () => {
      const { storage, limits } = await this.jsm.getAccountInfo();
      return limits.max_storage > 0 ? Math.max(0, limits.max_storage - storage) : null;
    });
  }

  async health(): Promise<BrokerHealth> {
    if (this.closed || this.nc.isClosed()) return { ok: false, detail: { nats: "closed" } };
    return this.healthCheck.check();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.maxAge?.stop();
    this.admission.close();
    await this.routes.stop();
    await this.inboxes.closeAll();
    // The usage this gateway has not written yet (bounded: NATS may be gone).
    if (this.ledger) {
      const gone = new Promise<void>((resolve) => setTimeout(resolve, DRAIN_TIMEOUT_MS).unref());
      await Promise.race([this.ledger.close(), gone]);
    }
    this.changes.stop();
    this.orphans.stop();
    // A drain waits for the server's answer; with NATS unreachable it would hang ~20 s and then
    // fail. Nothing is left to flush to a server that is gone: give it a moment, then just close.
    const drained = this.nc.drain().then(
      () => true,
      () => false,
    );
    const timedOut = new Promise<false>((resolve) => setTimeout(resolve, DRAIN_TIMEOUT_MS, false).unref());
    if (!(await Promise.race([drained, timedOut]))) await this.nc.close();
    this.publisher.stop();
  }

  /** The message is no longer pending (acknowledged, rejected, dead-lettered): its usage ends. */
  pendingSettled(doc: StatusDoc): void {
    if (doc.usageBytes !== undefined) this.ledger?.settled(doc.to, doc.usageBytes, doc.queuedAt);
  }

  /** Runs broker work; anything that is not already a BrokerError means NATS is unreachable or refused. */
  private async guard<R>(work: () => Promise<R>): Promise<R> {
    if (this.closed) throw new BrokerError("closed", "the broker is closed");
    try {
      return await work();
    } catch (error) {
      if (error instanceof BrokerError) throw error;
      throw new BrokerError(
        "unavailable",
        `NATS: ${error instanceof Error ? error.message : String(error)}`,
        {
          cause: error,
        },
      );
    }
  }
}
