import type { ConsumerInfo, JetStreamManager } from "@nats-io/jetstream";
import { Empty, type NatsConnection, RequestError, type Subscription } from "@nats-io/transport-node";
import type { Warn } from "../policy.js";
import { refOfKey } from "../validation.js";
import { Header, INBOX_STREAM, inboxSubject, livenessSubject } from "./layout.js";
import { type StatusDoc, type StatusStore, uncounted } from "./status-store.js";

/** How long a broker instance has to answer "are you there?" before it is taken to be (slow but) alive. */
const LIVENESS_TIMEOUT_MS = 2_000;
/** How long an instance's answer (alive or gone) is taken as still true. */
const ANSWER_KEPT_MS = 2_000;
/** Instances whose answer is kept, at most. */
const MAX_ASKED = 1_000;
/** Messages of one agent looked at per reclaim, at most (its consumer's unacknowledged span). */
const MAX_SCANNED = 2_048;

/**
 * Deliveries a dead gateway left behind. Every broker instance answers on its own liveness subject
 * while it is connected, and records itself as the `holder` of each delivery it hands out. The
 * sockets a gateway served die with it, but JetStream would hold their deliveries until their ack
 * wait ends; `reclaim` finds them when the agent's inbox opens again and has JetStream send them at
 * once. Only the deliveries of instances that no longer answer are touched: those of a gateway
 * that is alive (another socket of the agent, elsewhere) stay where they are.
 */
export class Orphans {
  private readonly responder: Subscription;
  private readonly asked = new Map<string, { at: number; alive: Promise<boolean> }>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly statuses: StatusStore,
    readonly instanceId: string,
    private readonly warn: Warn,
  ) {
    this.responder = nc.subscribe(livenessSubject(instanceId), {
      callback: (error, msg) => {
        if (!error) msg.respond(Empty);
      },
    });
  }

  stop(): void {
    this.responder.unsubscribe();
  }

  /**
   * Walks the agent's messages between its consumer's ack floor and its last delivery (what can
   * still be unacknowledged), and `nak`s each one handed out by an instance that no longer answers,
   * so JetStream sends it again now. Counted as a close counts them: the oldest one found stays an
   * attempt, the others are uncounted. Returns how many were reclaimed; never throws.
   */
  async reclaim(agentId: string, consumer: ConsumerInfo): Promise<number> {
    if (consumer.num_ack_pending === 0) return 0;
    let reclaimed = 0;
    try {
      let seq = consumer.ack_floor.stream_seq + 1;
      const last = consumer.delivered.stream_seq;
      for (let scanned = 0; seq <= last && scanned < MAX_SCANNED; scanned++) {
        const stored = await this.jsm.direct.getMessage(INBOX_STREAM, {
          seq,
          next_by_subj: inboxSubject(agentId),
        });
        if (!stored || stored.seq > last) break;
        seq = stored.seq + 1;
        const key = stored.header?.get("Nats-Msg-Id");
        const message = key ? refOfKey(key, stored.header?.get(Header.From) ?? "") : null;
        const record = message?.from ? await this.statuses.read(message) : null;
        const doc = record?.value;
        // No holder: handed out by a broker that does not record one; its ack wait decides.
        const holder = doc?.holder;
        if (!doc || !isOutAt(doc, stored.seq) || !holder || holder === this.instanceId) continue;
        if (await this.answers(holder)) continue;
        if (reclaimed > 0) await this.uncount(doc);
        this.nc.publish(doc.ackSubject as string, "-NAK");
        reclaimed++;
      }
    } catch (error) {
      this.warn(`inbox ${agentId}: could not look for deliveries of a dead gateway: ${String(error)}`);
    }
    return reclaimed;
  }

  /**
   * Does broker instance `id` answer? Only "no responders" counts as gone; a slow answer is alive.
   * An answer is kept for a few seconds, so a burst of questions about one instance asks once.
   */
  answers(id: string): Promise<boolean> {
    if (id === this.instanceId) return Promise.resolve(true);
    const now = Date.now();
    const known = this.asked.get(id);
    if (known && now - known.at < ANSWER_KEPT_MS) return known.alive;
    const alive = this.nc.request(livenessSubject(id), Empty, { timeout: LIVENESS_TIMEOUT_MS }).then(
      () => true,
      (error: unknown) => !(error instanceof RequestError && error.isNoResponders()),
    );
    this.asked.set(id, { at: now, alive });
    if (this.asked.size > MAX_ASKED) this.asked.delete(this.asked.keys().next().value as string);
    return alive;
  }

  /** Takes the hand-out back out of the count, unless the record moved on meanwhile. */
  private async uncount(seen: StatusDoc): Promise<void> {
    await this.statuses.mutate(seen, (current) => {
      const value = current?.value;
      if (value?.status !== "delivered" || value.ackSubject !== seen.ackSubject) return { result: undefined };
      return { next: uncounted(value), result: undefined };
    });
  }
}

/** The record shows this stream copy handed out and unacknowledged, with an ack subject to answer. */
function isOutAt(doc: StatusDoc, seq: number): boolean {
  return doc.status === "delivered" && doc.seq === seq && typeof doc.ackSubject === "string";
}
