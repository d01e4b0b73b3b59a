import type { ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import { DeliveryQueue } from "../delivery-queue.js";
import { ackWaitFor, type BrokerPolicy, expiresAtMs, isoTime } from "../policy.js";
import type { Delivery, Inbox, MessageKind } from "../types.js";
import { agentOfInboxSubject, Header } from "./layout.js";
import type { Decision, StatusDoc, StatusStore, Versioned } from "./status-store.js";

/** What a NATS inbox needs from its broker. */
export interface NatsInboxHost {
  readonly policy: BrokerPolicy;
  readonly statuses: StatusStore;
  released(inbox: NatsInbox): void;
  warn(message: string): void;
}

interface InFlight {
  msg: JsMsg;
  /** When JetStream stops waiting for this delivery's ack. */
  deadline: number;
}

interface Headers {
  id: string;
  from: string;
  to: string;
  kind: MessageKind;
  method: string;
  submittedAt: string;
  queuedAt: number;
}

/** The ack reply subject of a delivery. JsMsg does not type it, but every pulled message has one. */
function replySubject(msg: JsMsg): string | undefined {
  const reply = (msg as unknown as { reply?: unknown }).reply;
  return typeof reply === "string" && reply.length > 0 ? reply : undefined;
}

function readHeaders(msg: JsMsg): Headers | null {
  const h = msg.headers;
  const to = agentOfInboxSubject(msg.subject);
  const id = h?.get("Nats-Msg-Id");
  const kind = h?.get(Header.Kind);
  const queuedAt = Number(h?.get(Header.QueuedAt));
  if (!h || !to || !id || !kind || !Number.isFinite(queuedAt)) return null;
  return {
    id,
    from: h.get(Header.From),
    to,
    kind: kind as MessageKind,
    method: h.get(Header.Method),
    submittedAt: h.get(Header.SubmittedAt),
    queuedAt,
  };
}

/**
 * An agent's inbox over its durable JetStream consumer. Each message's status record is updated
 * (delivered, retry count, ack subject) before the hand-out; these updates run concurrently but
 * deliveries are handed out strictly in the order JetStream sent them. Redelivery and the
 * max-deliveries limit are the server's; the broker records the dead letter from its advisory.
 */
export class NatsInbox implements Inbox {
  private readonly queue: DeliveryQueue<Delivery>;
  private readonly inFlight = new Map<string, InFlight>();
  private handOut: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    readonly agentId: string,
    private readonly messages: ConsumerMessages,
    private readonly host: NatsInboxHost,
  ) {
    this.queue = new DeliveryQueue<Delivery>(() => this.close());
    void this.run();
  }

  [Symbol.asyncIterator](): AsyncIterator<Delivery> {
    return this.queue[Symbol.asyncIterator]();
  }

  /** Removes and returns the live delivery of `id`, if this inbox holds it. */
  take(id: string): JsMsg | undefined {
    const entry = this.inFlight.get(id);
    this.inFlight.delete(id);
    return entry?.msg;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.queue.close();
    this.inFlight.clear();
    this.host.released(this);
    // Unacknowledged messages stay pending on the durable consumer and come back after their ack wait.
    await this.messages.close();
  }

  private async run(): Promise<void> {
    try {
      for await (const msg of this.messages) {
        if (this.closed) break;
        const prepared = this.prepare(msg).catch((error: unknown) => {
          // Left unacknowledged: JetStream redelivers it after the ack wait.
          this.host.warn(
            `inbox ${this.agentId}: could not record delivery of seq ${msg.seq}: ${String(error)}`,
          );
          return null;
        });
        this.handOut = this.handOut.then(async () => {
          const delivery = await prepared;
          if (delivery && !this.closed) this.queue.push(delivery);
        });
      }
    } catch (error) {
      if (!this.closed) this.host.warn(`inbox ${this.agentId}: consumer stopped: ${String(error)}`);
    }
    // The consumer ended without close() (deleted on the server): end the iteration so the
    // gateway sees it and can open the inbox again.
    if (!this.closed) await this.close();
  }

  private async prepare(msg: JsMsg): Promise<Delivery | null> {
    const headers = readHeaders(msg);
    if (!headers) {
      msg.term("not an ACP message");
      return null;
    }
    const now = Date.now();
    if (now >= expiresAtMs(this.host.policy, headers.queuedAt)) {
      msg.term("expired");
      return null;
    }
    this.forgetExhausted(now);
    const attempt = msg.info.deliveryCount;
    const ackSubject = replySubject(msg);
    const decide = (current: Versioned<StatusDoc> | null): Decision<"deliver" | "ack" | "term" | "again"> => {
      // The submitting gateway writes the record right after its publish. If this delivery is
      // faster, write the record as the submit would have (queued) first, then go on as usual.
      if (!current)
        return { next: { ...headers, status: "queued", attempts: 0, seq: msg.seq }, result: "again" };
      const base = current.value;
      // A late duplicate copy (submitted again after the dedup window) is dropped silently.
      if (base.seq !== msg.seq) return { result: "ack" };
      if (base.status === "acknowledged") return { result: "ack" };
      if (base.status === "failed") return { result: "term" };
      const next: StatusDoc = {
        ...base,
        status: "delivered",
        deliveredAt: base.deliveredAt ?? now,
        attempts: attempt,
      };
      if (ackSubject !== undefined) next.ackSubject = ackSubject;
      return { next, result: "deliver" };
    };
    let outcome = await this.host.statuses.mutate(headers.id, decide);
    if (outcome === "again") outcome = await this.host.statuses.mutate(headers.id, decide);
    if (outcome === "again") return null; // deleted again meanwhile: left for redelivery
    if (outcome === "ack") {
      msg.ack();
      return null;
    }
    if (outcome === "term") {
      msg.term("already settled");
      return null;
    }
    this.inFlight.set(headers.id, { msg, deadline: now + ackWaitFor(this.host.policy, attempt) });
    return {
      id: headers.id,
      from: headers.from,
      to: headers.to,
      kind: headers.kind,
      method: headers.method,
      envelope: msg.string(),
      submittedAt: headers.submittedAt,
      queuedAt: isoTime(headers.queuedAt),
      attempt,
    };
  }

  /** Last deliveries past their ack wait will not come back (the server dead-letters them): drop them. */
  private forgetExhausted(now: number): void {
    for (const [id, entry] of this.inFlight) {
      if (entry.msg.info.deliveryCount >= this.host.policy.maxDeliver && entry.deadline <= now) {
        this.inFlight.delete(id);
      }
    }
  }
}
