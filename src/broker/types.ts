/**
 * The broker contract. The gateway talks only to this interface; `openBroker` picks the embedded
 * (SQLite) or NATS JetStream implementation at start-up. Envelopes are opaque JSON strings here:
 * validation and signature checks happen in the gateway before `submit`.
 */

import type { Priority } from "../protocol/priority.js";
import type { MessageType } from "../protocol/schemas.js";
import type { KvBucket, Unsubscribe } from "./keyed-state.js";

// The contract's other parts, in files of their own; importers take the whole contract from here.
export type { KvBucket, KvChange, KvEntry, Unsubscribe } from "./keyed-state.js";
export type {
  BrokerQuotas,
  CommonBrokerOptions,
  DeliveryOptions,
  EmbeddedBrokerOptions,
  NatsBrokerOptions,
  NatsConnectionOptions,
  NatsTlsOptions,
  OpenBrokerOptions,
} from "./options.js";

export const MESSAGE_STATUSES = ["queued", "delivered", "acknowledged", "failed", "expired"] as const;
/**
 * queued: persisted, not handed to the recipient yet. delivered: handed out, not acknowledged.
 * acknowledged / failed: terminal. expired: retention ran out before it was acknowledged or failed.
 */
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

/**
 * How a message is named: its sender and the id the sender gave it. Every sender has its own id
 * namespace: two senders' messages with one id are two messages (nobody can squat or probe another
 * sender's ids), and one sender's second submit of an id is a duplicate. Records and deliveries
 * carry both fields, so either names its message.
 */
export interface MessageRef {
  /** Sender agent id. */
  from: string;
  /** The sender's message id (its `message-id` header). */
  id: string;
}

export interface SubmitInput {
  /** The sender's message id: with `from`, the dedup key (NATS `Nats-Msg-Id`). */
  id: string;
  /** Sender agent id. */
  from: string;
  /** Recipient agent id: the message goes to `agent.<to>.inbox`. */
  to: string;
  /** The envelope's `message-type`: an error response is a `response`. */
  kind: MessageType;
  method: string;
  /** The signed envelope, serialized. Stored and delivered byte for byte. */
  envelope: string;
  /** ISO 8601 time the sender created the message (its `timestamp` header). */
  submittedAt: string;
  /**
   * How it ranks in the recipient's queue (default medium): of the messages waiting for the
   * recipient, the highest priority goes first, and one priority oldest first. Not part of the
   * signed envelope: the sender's authenticated submission sets it.
   */
  priority?: Priority;
  /**
   * Where an answer to this message goes: a route (see `route`) of the sender's, kept with the
   * message so that a later submit `inReplyTo` it is routed there.
   */
  replyTo?: string;
  /**
   * The id of the message this one answers (a response's JSON-RPC id), or reports on (a
   * notification about a request): if that message went from `to` to `from` with a `replyTo`, this
   * one is routed there.
   */
  inReplyTo?: string;
  /**
   * Deliver through this route: `<instanceId>/<name>`, handed to the `receiveRouted` handler of
   * `to` on broker instance `instanceId` (the gateway holding that route's socket), ahead of the
   * agent's queue and outside any window. With no such handler, or if the delivery is given back or
   * its ack wait ends, the message is delivered like any other.
   */
  route?: string;
}

export interface SubmitResult {
  id: string;
  status: MessageStatus;
  /** True when this id was submitted before: nothing new was stored or delivered. */
  duplicate: boolean;
}

/** Why a message ended `failed`; visible to the sender through `status()`. */
export interface DeadLetter {
  reason: "max-deliveries" | "rejected";
  detail: string;
  at: string;
}

/** A message's routing metadata and delivery status (everything but the envelope). */
export interface MessageRecord {
  id: string;
  from: string;
  to: string;
  kind: MessageType;
  method: string;
  submittedAt: string;
  status: MessageStatus;
  queuedAt: string;
  deliveredAt?: string;
  acknowledgedAt?: string;
  failedAt?: string;
  /** When the envelope left retention (set once that time has passed, whatever the status). */
  expiredAt?: string;
  /** Deliveries after the first (0 after one delivery). */
  retryCount: number;
  lastError?: string;
  deadLetter?: DeadLetter;
}

export interface StoredMessage extends MessageRecord {
  /** The envelope, or null once retention has removed it. */
  envelope: string | null;
}

/** One hand-out of a message to its recipient. Acknowledge with `broker.ack(to, delivery)`. */
export interface Delivery {
  id: string;
  from: string;
  to: string;
  kind: MessageType;
  method: string;
  envelope: string;
  submittedAt: string;
  queuedAt: string;
  /**
   * 1 for the first delivery, 2 after the first ack wait ran out, … up to `maxDeliver`. Of the
   * hand-outs given back by closing the inbox only the oldest one the agent had counts; the others
   * come back with the same number (docs/brokers.md, "Resume").
   */
  attempt: number;
  priority: Priority;
  /** The route it was delivered through (`receiveRouted`); absent for the agent's queue. */
  route?: string;
  /**
   * How long this delivery waits for its acknowledgement, counted from when the consumer took it
   * from the inbox; each `broker.working` for it starts this wait again.
   */
  ackWaitMs: number;
}

export interface InboxOptions {
  /** Deliveries handed out and not yet acknowledged, at most. Default 32. */
  maxInFlight?: number;
}

/**
 * An agent's open inbox: deliveries in submit order (redeliveries come when their ack wait ends).
 * Iterate it once. A delivery is handed out, and its ack wait starts, when the consumer takes it:
 * an inbox that fetches ahead (NATS) keeps what it holds from timing out until then, so a consumer
 * that takes only what it can handle never sees a delivery expire before it asked for it. Closing
 * it (or leaving the loop) gives unacknowledged hand-outs back: the next open delivers them at
 * once, in order.
 */
export interface Inbox extends AsyncIterable<Delivery> {
  readonly agentId: string;
  /**
   * Gives these hand-outs back (one consumer of several went away), due at once for the next take,
   * counted as a close counts them: the oldest as an attempt, the others not. Messages it does not hold
   * are ignored.
   */
  giveBack(messages: readonly MessageRef[]): Promise<void>;
  /**
   * Has what a gateway that died handed out to this agent sent again at once (a socket of the agent
   * just arrived: it may be one that gateway served). Opening does it too; on a single-process
   * broker nothing else can hold a delivery, so nothing is to be done.
   */
  reclaim(): void;
  /** Stops the inbox (its agent may open it again); what it handed out and was not acknowledged comes again. */
  close(): Promise<void>;
}

/** Receives the deliveries routed to one agent at this broker instance (`Broker.receiveRouted`). */
export interface RoutedReceiver {
  /** Gives these routed hand-outs back: they are delivered like any other message, uncounted. */
  giveBack(messages: readonly MessageRef[]): Promise<void>;
  /** Stops receiving; routed hand-outs not acknowledged are given back. */
  close(): Promise<void>;
}

export interface ListQuery {
  /** The agent asking: only messages it sent or received are listed. */
  participant: string;
  from?: string;
  to?: string;
  kind?: MessageType;
  method?: string;
  status?: MessageStatus;
  /** `nextCursor` of the previous page. */
  cursor?: string;
  /** Page size, 1..500. Default 50. */
  limit?: number;
}

export interface ListPage {
  /** Oldest first. */
  items: MessageRecord[];
  /** Pass as `cursor` for the next page; null when there is none. */
  nextCursor: string | null;
}

/**
 * Live change feed for dashboards, metrics and webhooks (at most once, not replayed).
 * On NATS it covers changes made through every gateway on that NATS.
 */
export type BrokerEvent =
  | { type: "message.status"; message: MessageRecord }
  | { type: "kv"; bucket: string; key: string; op: "put" | "delete"; value: unknown };

/**
 * `ok` is false while the broker cannot do its job: the store is closed or unreachable, or its
 * writes are failing (disk full…). `detail` has one line per part checked, plus `since` (ISO 8601)
 * while a lasting problem is reported: when it was first seen. Embedded: `storage`. NATS: `nats`
 * (the connection), `jetstream` (the streams), and `storage` while JetStream refuses writes.
 */
export interface BrokerHealth {
  ok: boolean;
  detail: Record<string, string>;
}

export const QUOTA_NAMES = [
  "recipient-pending-messages",
  "recipient-pending-bytes",
  "sender-stored-bytes",
] as const;
/** The name a refusal gives the quota it hit (BrokerError `quota`, and the gateway's -32013 `data.quota`). */
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** What one agent uses of the quotas (`Broker.usage`). */
export interface AgentUsage {
  /** Messages to the agent not yet acknowledged, failed or expired, and their envelopes' bytes. */
  pendingMessages: number;
  pendingBytes: number;
  /** Bytes of the agent's own envelopes still stored. */
  storedBytes: number;
}

/** Which driver stores the messages: SQLite in the gateway's process, or NATS JetStream. */
export type BrokerKind = "embedded" | "nats";

/**
 * The message store behind a gateway: durable submission with exactly-once acceptance, at-least-once
 * delivery to one inbox per agent, message status, and keyed state. Two drivers implement it
 * (`EmbeddedBroker`, `NatsBroker`) and pass one conformance suite (test/broker); errors are
 * `BrokerError`s with a `kind` (docs/brokers.md).
 */
export interface Broker {
  readonly kind: BrokerKind;
  /** This broker instance among all on the same store (a gateway process): the first part of its routes. */
  readonly instanceId: string;
  /** The ack wait of a first delivery (`delivery.ackWaitMs`); later attempts wait longer. */
  readonly ackWaitMs: number;
  /**
   * The largest envelope (UTF-8 bytes) `submit` stores; a larger one is refused (`invalid_argument`,
   * field `envelope`). Infinity on the embedded broker; on NATS the server's `max_payload` minus
   * room for the message headers. The gateway caps its own envelope limit to it.
   */
  readonly maxEnvelopeBytes: number;
  /**
   * Persists the message (durable when this resolves) and queues it for `to`. Idempotent by sender
   * and id (MessageRef).
   * Past a quota (`quotas`) it is refused with BrokerError `quota` and nothing is stored; a
   * resubmission of a stored message is answered `duplicate` whatever the quotas.
   */
  submit(input: SubmitInput): Promise<SubmitResult>;
  /**
   * What `agentId` uses of the quotas. Embedded: exact. NATS: as this broker knows it, which
   * includes what other gateways on the same NATS recorded up to a moment ago (docs/brokers.md).
   */
  usage(agentId: string): Promise<AgentUsage>;
  /** One open inbox per agent per broker instance; a second open fails until the first is closed. */
  openInbox(agentId: string, options?: InboxOptions): Promise<Inbox>;
  /**
   * Hands each message submitted with a route of this instance (`<instanceId>/…`) to `agentId` to
   * `deliver`, at once: a delivery like any other (acknowledge it, `working`, or it is taken back
   * when its ack wait ends), outside any inbox's order and `maxInFlight`. One receiver per agent per
   * broker instance.
   */
  receiveRouted(agentId: string, deliver: (delivery: Delivery) => void): RoutedReceiver;
  /**
   * Only the recipient may acknowledge (the sender is refused `forbidden`; anyone else is told
   * `not_found`, as for a message that does not exist). Acknowledging twice is harmless.
   */
  ack(agentId: string, message: MessageRef): Promise<MessageRecord>;
  /**
   * The recipient is still working on a delivery it holds: its ack wait starts again from now, as
   * for a new delivery of the same attempt (JetStream's in-progress acknowledgement, `+WPI`). Only
   * the recipient; `invalid_state` for a message not out for delivery (queued, settled, expired).
   */
  working(agentId: string, message: MessageRef): Promise<void>;
  /** The recipient declines the message: it ends `failed` with a dead-letter record. */
  reject(agentId: string, message: MessageRef, reason: string): Promise<MessageRecord>;
  /** The message's delivery record (status, attempts, timestamps), or null when unknown. */
  status(message: MessageRef): Promise<MessageRecord | null>;
  /** The delivery record with the stored envelope, or null when unknown. */
  get(message: MessageRef): Promise<StoredMessage | null>;
  /**
   * The senders of the messages to `recipient` with this id, at most two (ids are per sender, so
   * two means the id alone is ambiguous): of those still waiting (queued or delivered) if any,
   * else of the settled ones. For callers that know only an id, as the messaging platform's REST
   * shape does. Embedded: an index by recipient and id; NATS: a subject-filtered read of the status
   * bucket's keys.
   */
  sendersTo(recipient: string, id: string): Promise<string[]>;
  /** A page of the records of `query.participant`'s messages matching `query`, oldest first. */
  list(query: ListQuery): Promise<ListPage>;
  /** The keyed-state bucket `bucket`, created on first use (name: `[A-Za-z0-9_-]{1,64}`). */
  kv<T = unknown>(bucket: string): KvBucket<T>;
  /** The live change feed (`BrokerEvent`: message status and keyed-state changes), at most once. */
  events(handler: (event: BrokerEvent) => void): Promise<Unsubscribe>;
  /** Whether the broker can do its job now, part by part (`BrokerHealth`), for `/health`. */
  health(): Promise<BrokerHealth>;
  /**
   * Bytes the store can still take. Embedded: the free space of the data directory's file system
   * (for an unprivileged user). NATS: what the JetStream account's storage limit leaves, or null
   * when the account has no limit (JetStream then only refuses at the server's own reservation).
   */
  storageRoom(): Promise<number | null>;
  /** Flushes pending writes, closes inboxes and releases the store or connection. */
  close(): Promise<void>;
}
