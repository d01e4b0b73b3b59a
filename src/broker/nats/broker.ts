import { randomUUID } from "node:crypto";
import {
  type ConsumerInfo,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { BrokerError } from "../errors.js";
import {
  type BrokerPolicy,
  DEFAULT_LIST_LIMIT,
  DEFAULT_MAX_IN_FLIGHT,
  resolvePolicy,
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
  Inbox,
  InboxOptions,
  KvBucket,
  ListPage,
  ListQuery,
  MessageRecord,
  MessageRef,
  NatsBrokerOptions,
  StoredMessage,
  SubmitInput,
  SubmitResult,
  Unsubscribe,
} from "../types.js";
import {
  checkAgentId,
  checkBucketName,
  checkListQuery,
  checkMessageRef,
  checkSubmit,
  decodeCursor,
} from "../validation.js";
import { ChangeFeed } from "./change-feed.js";
import { connectNats } from "./connection.js";
import { NatsHealth } from "./health.js";
import { NatsInbox, type NatsInboxHost, replySubject } from "./inbox.js";
import { NatsBucket } from "./kv.js";
import {
  bucketOptions,
  consumerName,
  ensureStreams,
  INBOX_STREAM,
  inboxConsumerConfig,
  STATUS_BUCKET,
} from "./layout.js";
import { listMessages } from "./listing.js";
import { Orphans } from "./orphans.js";
import { Settlement } from "./settlement.js";
import { StreamPublisher } from "./publisher.js";
import { type StatusDoc, StatusStore } from "./status-store.js";
import { checkEnvelopeSize, maxEnvelopeBytes, storeMessage } from "./submission.js";
import { DEFAULT_MAX_PENDING_SUBMITS, DEFAULT_SUBMIT_STALL_MS, SubmitAdmission } from "./submit-admission.js";
import { UsageLedger } from "./usage-ledger.js";

/**
 * The broker on NATS JetStream. Every gateway process connected to the same NATS shares the
 * streams, consumers and buckets, so a message submitted at one gateway reaches an inbox open at another.
 */
/** How long `close` lets the connection drain before closing it outright. */
const DRAIN_TIMEOUT_MS = 2_000;
/** JetStream: "consumer already exists" (a create whose config differs from the existing one's). */
const CONSUMER_EXISTS = 10148;

export class NatsBroker implements Broker, NatsInboxHost {
  readonly kind = "nats" as const;
  private readonly inboxes = new Map<string, NatsInbox>();
  /** Agents whose inbox is being opened (consumer set-up in progress): a second open must fail too. */
  private readonly opening = new Set<string>();
  private readonly changes: ChangeFeed;
  private readonly healthCheck: NatsHealth;
  private readonly orphans: Orphans;
  private readonly settlement: Settlement;
  /** This broker (gateway process) among all on the same NATS: the holder of its hand-outs. */
  readonly instanceId = randomUUID();
  private closed = false;

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
    try {
      const jsm = await jetstreamManager(nc);
      await ensureStreams(jsm, policy, replicas);
      const kvm = new Kvm(nc);
      const statusKv = await kvm.create(STATUS_BUCKET, {
        ...bucketOptions(STATUS_BUCKET, replicas),
        ttl: policy.recordRetentionMs,
      });
      const publisher = new StreamPublisher(nc);
      const warn = warner(options, "acp broker (nats)");
      const quotas = resolveQuotas(options.quotas);
      const ledger = quotas && (await UsageLedger.open(kvm, publisher, replicas, quotas, policy, warn));
      return new NatsBroker(
        nc,
        jsm,
        jetstream(nc),
        kvm,
        publisher,
        new StatusStore(statusKv, publisher),
        policy,
        replicas,
        admission,
        warn,
        ledger,
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
    private readonly js: JetStreamClient,
    private readonly kvm: Kvm,
    private readonly publisher: StreamPublisher,
    readonly statuses: StatusStore,
    readonly policy: BrokerPolicy,
    private readonly replicas: number,
    private readonly admission: SubmitAdmission,
    readonly warn: Warn,
    /** Quota usage, kept only while quotas are set. */
    readonly ledger: UsageLedger | undefined,
  ) {
    this.changes = new ChangeFeed(nc, policy, warn);
    this.healthCheck = new NatsHealth(nc, publisher.failures);
    this.orphans = new Orphans(nc, jsm, statuses, this.instanceId, warn);
    this.settlement = new Settlement(
      nc,
      publisher,
      statuses,
      policy,
      (agentId) => this.inboxes.get(agentId),
      (doc) => this.pendingSettled(doc),
    );
  }

  get ackWaitMs(): number {
    return this.policy.ackWaitMs;
  }

  /** The server's `max_payload` (from the connected server's INFO) minus room for the headers. */
  get maxEnvelopeBytes(): number {
    return maxEnvelopeBytes(this.nc.info?.max_payload);
  }

  submit(input: SubmitInput): Promise<SubmitResult> {
    return this.guard(async () => {
      checkSubmit(input);
      checkEnvelopeSize(input.envelope, this.nc.info?.max_payload);
      const queuedAt = Date.now();
      // The inbox's status write for this id waits for the record written here (see StatusStore.lock).
      const store = (usageBytes: number | undefined) =>
        this.admission.run(() =>
          this.statuses.lock(input, () =>
            storeMessage(this.publisher, this.statuses, this.policy, input, queuedAt, usageBytes),
          ),
        );
      if (!this.ledger) return store(undefined);
      return this.ledger.submit(
        input,
        queuedAt,
        async () => (await this.statuses.read(input)) !== null,
        store,
      );
    });
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
      // A closing inbox is still giving its deliveries back: the new one starts after that, so
      // they come first and in order.
      const closing = this.inboxes.get(agentId);
      if (closing?.isClosing) await closing.close();
      if (this.inboxes.has(agentId) || this.opening.has(agentId)) {
        throw new BrokerError("invalid_state", `the inbox of ${agentId} is already open in this broker`);
      }
      this.opening.add(agentId);
      try {
        const info = await this.inboxConsumer(agentId, maxInFlight);
        const consumer = this.js.consumers.getConsumerFromInfo(info);
        const messages = await consumer.consume({ max_messages: maxInFlight });
        const inbox = new NatsInbox(agentId, messages, this, Math.min(info.num_pending, maxInFlight));
        this.inboxes.set(agentId, inbox);
        // What a dead gateway handed out to this agent goes to the pull just opened (orphans.ts).
        void this.orphans.reclaim(agentId, info);
        return inbox;
      } finally {
        this.opening.delete(agentId);
      }
    });
  }

  /**
   * The agent's durable consumer, created or brought to this config, in one request in the usual
   * case: a create with the config the consumer already has returns it as it is (nats-server 2.9
   * also updates it in place). A newer server refuses a create whose config differs (for example
   * another `maxInFlight`): then it is updated, keeping its delivery state. The answer is all the
   * pull consumer needs, so no separate look-up follows.
   */
  private async inboxConsumer(agentId: string, maxInFlight: number): Promise<ConsumerInfo> {
    const config = inboxConsumerConfig(agentId, this.policy, maxInFlight);
    try {
      return await this.jsm.consumers.add(INBOX_STREAM, config);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || error.code !== CONSUMER_EXISTS) throw error;
      return this.jsm.consumers.update(INBOX_STREAM, consumerName(agentId), config);
    }
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
      // With replicas a direct get may be answered by a follower that has not stored it yet: ask the leader.
      const stored =
        this.replicas > 1
          ? await this.jsm.streams.getMessage(INBOX_STREAM, { seq: current.value.seq })
          : await this.jsm.direct.getMessage(INBOX_STREAM, { seq: current.value.seq });
      return { ...record, envelope: stored ? stored.string() : null };
    });
  }

  list(query: ListQuery): Promise<ListPage> {
    return this.guard(async () => {
      checkListQuery(query);
      return listMessages(
        this.jsm,
        this.statuses,
        this.policy,
        query,
        decodeCursor(query.cursor),
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
    this.admission.close();
    await Promise.all([...this.inboxes.values()].map((inbox) => inbox.close()));
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

  // NatsInboxHost

  /** The message is no longer pending (acknowledged, rejected, dead-lettered): its usage ends. */
  pendingSettled(doc: StatusDoc): void {
    if (doc.usageBytes !== undefined) this.ledger?.settled(doc.to, doc.usageBytes, doc.queuedAt);
  }

  released(inbox: NatsInbox): void {
    if (this.inboxes.get(inbox.agentId) === inbox) this.inboxes.delete(inbox.agentId);
  }

  async redeliverNow(agentId: string, msgs: JsMsg[]): Promise<void> {
    try {
      // nats-server (2.9) would still hand a redelivery to the closed inbox's last pull request,
      // whose subscriber is gone, and the message would then wait out its ack wait. Reading the
      // consumer's info makes the server drop such requests first.
      await this.jsm.consumers.info(INBOX_STREAM, consumerName(agentId));
    } catch {
      // Not reachable: the naks below fail too, and JetStream redelivers after the ack wait.
    }
    // Each nak waits for the server's confirmation: the consumer applies acks asynchronously, and
    // the next inbox's first pull must find these queued for redelivery, ahead of newer messages.
    await Promise.all(
      msgs.map((msg) =>
        this.nc.request(replySubject(msg) ?? "", "-NAK", { timeout: 5_000 }).catch(() => undefined),
      ),
    );
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
