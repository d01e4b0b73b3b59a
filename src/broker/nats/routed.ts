import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { Priority } from "../../protocol/priority.js";
import { ackWaitFor, type BrokerPolicy, isoTime, maxDeliveriesDetail, type Warn } from "../policy.js";
import type { Delivery, MessageRef, RoutedReceiver } from "../types.js";
import { instanceOfRoute, refKey } from "../validation.js";
import { routedSubject } from "./layout.js";
import { type StatusDoc, type StatusStore, uncounted } from "./status-store.js";

/**
 * How long the agent's queue leaves a routed message to its route: the route's gateway claims it
 * within milliseconds of its submit; only a route whose gateway is gone lets this run out.
 */
export const ROUTE_CLAIM_MS = 5_000;

/**
 * Until when the agent's queue leaves message `doc` to its route: while unclaimed, ROUTE_CLAIM_MS
 * from its submit; while claimed (held by an instance, with no JetStream ack subject), until the
 * claim's ack wait ends. Null when the route has no hold on it.
 */
export function routeHoldsUntil(doc: StatusDoc, now: number): number | null {
  if (!doc.route) return null;
  let until = 0;
  if (doc.status === "queued") until = doc.queuedAt + ROUTE_CLAIM_MS;
  else if (doc.status === "delivered" && doc.holder && !doc.ackSubject) until = doc.dueAt ?? 0;
  return until > now ? until : null;
}

/** A routed message's stored envelope and priority, by stream sequence (null once retention removed it). */
type FetchEnvelope = (seq: number) => Promise<{ envelope: string; priority: Priority } | null>;

interface Notice {
  to: string;
  from: string;
  id: string;
}

/**
 * Messages submitted with a route of this broker instance (`SubmitInput.route`). The submitting
 * broker stores the message on the agent's subject, with the route in its status record, and
 * announces it on `acp.broker.<instance>.routed`; the receiver here claims it in the record
 * (queued → delivered, held by this instance, no JetStream ack subject) and hands it out. The
 * agent's durable consumer, which JetStream also hands it to, leaves it alone while it is claimed
 * (or, unclaimed, for ROUTE_CLAIM_MS) and acknowledges it once settled (NatsInbox.prepare): the
 * stream keeps every message until it is settled, whichever way it went out.
 */
export class RoutedDeliveries {
  private readonly receivers = new Map<string, NatsRouted>();
  private readonly notices: Subscription;

  constructor(
    private readonly nc: NatsConnection,
    private readonly statuses: StatusStore,
    private readonly policy: BrokerPolicy,
    private readonly instanceId: string,
    private readonly fetchEnvelope: FetchEnvelope,
    private readonly warn: Warn,
  ) {
    this.notices = nc.subscribe(routedSubject(instanceId), {
      callback: (error, msg) => {
        if (error) return;
        try {
          const notice = msg.json<Notice>();
          void this.arrived(notice.to, { from: notice.from, id: notice.id });
        } catch {
          // not a notice of ours
        }
      },
    });
  }

  receive(agentId: string, deliver: (delivery: Delivery) => void): NatsRouted {
    const receiver = new NatsRouted(agentId, deliver, this, () => {
      if (this.receivers.get(agentId) === receiver) this.receivers.delete(agentId);
    });
    this.receivers.set(agentId, receiver);
    return receiver;
  }

  receiverOf(agentId: string): NatsRouted | undefined {
    return this.receivers.get(agentId);
  }

  has(agentId: string): boolean {
    return this.receivers.has(agentId);
  }

  /** `message` to `to` was stored with `route`: its instance hands it out. */
  routed(to: string, message: MessageRef, route: string): void {
    const instance = instanceOfRoute(route);
    if (instance === this.instanceId) void this.arrived(to, message);
    else {
      const notice: Notice = { to, from: message.from, id: message.id };
      this.nc.publish(routedSubject(instance), JSON.stringify(notice));
    }
  }

  async stop(): Promise<void> {
    this.notices.unsubscribe();
    await Promise.all([...this.receivers.values()].map((receiver) => receiver.close()));
  }

  /** Claims a message routed here and hands it to its agent's receiver; with none, gives up its route. */
  private async arrived(to: string, message: MessageRef): Promise<void> {
    try {
      const receiver = this.receivers.get(to);
      if (receiver) await receiver.claim(message);
      else await this.release(message, "gone");
    } catch (error) {
      this.warn(`routed delivery of ${message.id}: ${String(error)}; its queue delivers it`);
    }
  }

  /** @internal Claims `message` for a hand-out here; null when it is not (any longer) the route's to take. */
  async claim(message: MessageRef): Promise<{ doc: StatusDoc; wait: number } | null> {
    const now = Date.now();
    return this.statuses.mutate(message, (current) => {
      const value = current?.value;
      if (value?.status !== "queued" || !value.route || instanceOfRoute(value.route) !== this.instanceId)
        return { result: null };
      const attempts = value.attempts + 1;
      const wait = ackWaitFor(this.policy, attempts);
      const next: StatusDoc = {
        ...value,
        status: "delivered",
        deliveredAt: value.deliveredAt ?? now,
        attempts,
        dueAt: now + wait,
        ackSubject: undefined,
        holder: this.instanceId,
      };
      return { next, result: { doc: next, wait } };
    });
  }

  /** @internal The hand-out as a Delivery, with its envelope; null when the envelope is gone. */
  async delivery(doc: StatusDoc, wait: number): Promise<Delivery | null> {
    const stored = await this.fetchEnvelope(doc.seq);
    if (stored === null) return null;
    return {
      id: doc.id,
      from: doc.from,
      to: doc.to,
      kind: doc.kind,
      method: doc.method,
      envelope: stored.envelope,
      submittedAt: doc.submittedAt,
      queuedAt: isoTime(doc.queuedAt),
      attempt: doc.attempts,
      priority: stored.priority,
      ackWaitMs: wait,
      route: doc.route as string,
    };
  }

  /**
   * @internal The route gives `message` up: its queue delivers it now. "timed-out": its ack wait
   * ran out (counted; the last allowed delivery is dead-lettered); "given-back": uncounted; "gone":
   * never handed out here. Returns the end of the ack wait instead when "timed-out" comes before
   * it: working() through another gateway moves only the record's `dueAt`.
   */
  async release(message: MessageRef, why: "timed-out" | "given-back" | "gone"): Promise<number | undefined> {
    const now = Date.now();
    return this.statuses.mutate<number | undefined>(message, (current) => {
      const value = current?.value;
      if (!value?.route) return { result: undefined };
      const mine =
        why === "gone"
          ? value.status === "queued"
          : value.status === "delivered" && value.holder === this.instanceId && !value.ackSubject;
      if (!mine) return { result: undefined };
      if (why === "timed-out" && typeof value.dueAt === "number" && value.dueAt > now)
        return { result: value.dueAt };
      let next: StatusDoc = { ...value, route: undefined };
      if (why === "given-back") next = { ...uncounted(value), route: undefined };
      else if (why === "timed-out" && value.attempts >= this.policy.maxDeliver) {
        const detail = maxDeliveriesDetail(value.attempts);
        next = {
          ...next,
          status: "failed",
          failedAt: value.dueAt ?? Date.now(),
          dueAt: undefined,
          holder: undefined,
          lastError: detail,
          deadLetter: { reason: "max-deliveries", detail },
        };
      } else if (why === "timed-out") next = { ...next, dueAt: undefined, holder: undefined };
      return { next, result: undefined };
    });
  }
}

/** One agent's routed deliveries at this broker instance. */
export class NatsRouted implements RoutedReceiver {
  /** Hand-outs not settled yet, by `refKey`. */
  private readonly out = new Map<string, { message: MessageRef; timer: NodeJS.Timeout }>();
  private closed = false;

  constructor(
    readonly agentId: string,
    private readonly deliver: (delivery: Delivery) => void,
    private readonly routes: RoutedDeliveries,
    private readonly onClose: () => void,
  ) {}

  /** @internal */
  async claim(message: MessageRef): Promise<void> {
    if (this.closed) {
      await this.routes.release(message, "gone");
      return;
    }
    const claimed = await this.routes.claim(message);
    if (!claimed) return;
    const delivery = await this.routes.delivery(claimed.doc, claimed.wait);
    if (!delivery || this.closed) {
      await this.routes.release(message, "given-back");
      return;
    }
    const ref = { from: message.from, id: message.id };
    this.out.set(refKey(ref), { message: ref, timer: this.ackTimer(ref, claimed.wait) });
    this.deliver(delivery);
  }

  /** Its ack wait started again (`working`): the record says `dueAt` now. */
  extend(message: MessageRef, dueAt: number): boolean {
    const entry = this.out.get(refKey(message));
    if (!entry) return false;
    clearTimeout(entry.timer);
    entry.timer = this.ackTimer(entry.message, Math.max(0, dueAt - Date.now()));
    return true;
  }

  /** Settled through the broker: no longer out. */
  take(message: MessageRef): boolean {
    const key = refKey(message);
    const entry = this.out.get(key);
    if (!entry) return false;
    clearTimeout(entry.timer);
    this.out.delete(key);
    return true;
  }

  async giveBack(messages: readonly MessageRef[]): Promise<void> {
    const held = messages.filter((message) => this.take(message));
    await Promise.all(held.map((message) => this.routes.release(message, "given-back")));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.giveBack([...this.out.values()].map((entry) => entry.message));
    this.onClose();
  }

  private ackTimer(message: MessageRef, waitMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (!this.take(message)) return;
      void this.routes.release(message, "timed-out").then((movedTo) => {
        if (movedTo === undefined) return;
        // working() at another gateway restarted its ack wait: it stays out until the new end.
        if (this.closed) void this.routes.release(message, "given-back");
        else this.out.set(refKey(message), { message, timer: this.ackTimer(message, movedTo - Date.now()) });
      });
    }, waitMs);
    timer.unref();
    return timer;
  }
}
