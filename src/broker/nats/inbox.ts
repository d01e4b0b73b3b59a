import type { ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import { DeliveryQueue, deliveryRank, takeNext } from "../delivery-queue.js";
import { isBrokerError } from "../errors.js";
import { ackWaitFor, type BrokerPolicy, expiresAtMs } from "../policy.js";
import type { Delivery, Inbox, MessageRef } from "../types.js";
import { instanceOfRoute, refKey } from "../validation.js";
import { type GivenBack, giveBackDeliveries } from "./give-back.js";
import { decideHandOut, type HandOutContext, toDelivery } from "./hand-out.js";
import { readHeaders, replySubject } from "./headers.js";
import type { StatusDoc, StatusStore, Versioned } from "./status-store.js";
import type { UsageLedger } from "./usage-ledger.js";

/** What a NATS inbox needs from its broker. */
export interface NatsInboxHost {
  readonly policy: BrokerPolicy;
  /** Recorded as the holder of each hand-out (see orphans.ts). */
  readonly instanceId: string;
  /** `broker.working`: restarts a delivery's ack wait, in its status record and here. */
  working(agentId: string, message: MessageRef): Promise<void>;
  readonly statuses: StatusStore;
  /** Quota usage, when kept (records this inbox creates then carry their bytes). */
  readonly ledger: UsageLedger | undefined;
  /** The message is no longer pending (here: dead-lettered); its quota usage ends. */
  pendingSettled(doc: StatusDoc): void;
  /** Has JetStream redeliver these at once (in this order), before anything newer (see `giveBack`). */
  redeliverNow(agentId: string, msgs: JsMsg[]): Promise<void>;
  /** Looks for what a dead gateway handed out to this agent (orphans.ts). */
  reclaim(agentId: string): void;
  /** Whether broker instance `id` still answers (orphans.ts). */
  instanceAlive(id: string): Promise<boolean>;
  released(inbox: NatsInbox): void;
  warn(message: string): void;
}

/** The backlog held at open (see `NatsInbox.held`): what arrived of it, how many are still to come. */
interface HeldBacklog {
  deliveries: Delivery[];
  left: number;
  timer: NodeJS.Timeout;
}

interface InFlight extends GivenBack {
  /** The policy's ack wait for this attempt (`dueAt` is when it ends, as in the status record). */
  waitMs: number;
  /** Redelivers at `dueAt` when JetStream would wait longer (see `catchUp`). */
  timer: NodeJS.Timeout | null;
}

/** JetStream's ack wait must exceed the policy's by this much before the inbox redelivers by itself. */
const CATCH_UP_MARGIN_MS = 1_000;
/** A message the route holds comes back to the queue this long after the hold ends… */
const ROUTE_DEFER_MARGIN_MS = 100;
/** …or after this, to see whether the route settled it or gave it up meanwhile. */
const ROUTE_RECHECK_MS = 1_000;
/** How long a closing inbox waits for the server to confirm it stopped pulling. */
const DRAIN_TIMEOUT_MS = 2_000;
/** How long a new inbox holds its first deliveries back while the backlog JetStream reported arrives. */
const BACKLOG_WAIT_MS = 250;

/** Waits for `promise` to settle, at most `ms`; its outcome does not matter. */
function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  // Left to run out when the promise wins (as the broker's own close does): it keeps no process alive.
  const timedOut = new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
  return Promise.race([
    promise.then(
      () => undefined,
      () => undefined,
    ),
    timedOut,
  ]);
}

/**
 * An agent's inbox over its durable JetStream consumer. Each message's status record is updated
 * (delivered, attempt, ack wait end, ack subject) before the hand-out; these updates run
 * concurrently but deliveries are handed out strictly in the order JetStream sent them.
 *
 * The broker counts attempts in the status record, not with JetStream's delivery count: closing
 * the inbox gives its hand-outs back (`nak`, redelivered at once) and counts only the oldest one
 * the agent received (see `giveBack`); a delivery arriving when the record already shows
 * `maxDeliver` counted attempts is dead-lettered.
 */
export class NatsInbox implements Inbox {
  private readonly queue: DeliveryQueue<Delivery>;
  private readonly inFlight = new Map<string, InFlight>();
  /** Pulled while closing, never handed out: given back too. */
  private readonly unprepared: JsMsg[] = [];
  /** Held for its route (see `defer`), with the timer that looks at it again. */
  private readonly deferred = new Map<JsMsg, NodeJS.Timeout>();
  private handOut: Promise<void> = Promise.resolve();
  private readonly running: Promise<void>;
  private closing: Promise<void> | null = null;
  private readonly keepAlive: NodeJS.Timeout;
  /**
   * The backlog waiting when the inbox opened, held back until it has all arrived (or
   * BACKLOG_WAIT_MS passed) and then handed out highest priority first: JetStream sends in stream
   * order, and the first message would otherwise go out before a more urgent one behind it came.
   */
  private held: HeldBacklog | null = null;

  constructor(
    readonly agentId: string,
    private readonly messages: ConsumerMessages,
    private readonly host: NatsInboxHost,
    /** Messages JetStream had for this agent at open, up to what one pull takes (maxInFlight). */
    backlog = 0,
  ) {
    if (backlog > 1) {
      const held: HeldBacklog = {
        deliveries: [],
        left: backlog,
        timer: setTimeout(() => this.releaseHeld(held), BACKLOG_WAIT_MS),
      };
      held.timer.unref();
      this.held = held;
    }
    this.queue = new DeliveryQueue<Delivery>(
      () => this.close(),
      (delivery) => {
        const entry = this.inFlight.get(refKey(delivery));
        if (entry) entry.taken = true;
      },
    );
    this.running = this.run();
    this.keepAlive = setInterval(() => this.keepUntaken(), Math.max(50, host.policy.ackWaitMs / 3));
    this.keepAlive.unref();
  }

  [Symbol.asyncIterator](): AsyncIterator<Delivery> {
    return this.queue[Symbol.asyncIterator]();
  }

  /** True once `close()` started: the next open of this agent waits for it to finish. */
  get isClosing(): boolean {
    return this.closing !== null;
  }

  /**
   * Removes and returns the live delivery of `message`, if this inbox holds it, to be settled. If
   * it still waits in the queue (a redelivery the agent settled through its earlier copy), it is
   * not handed out.
   */
  take(message: MessageRef): JsMsg | undefined {
    const entry = this.inFlight.get(refKey(message));
    if (!entry) return undefined;
    this.drop(entry);
    return entry.msg;
  }

  /** Restarts the ack wait of the live delivery of `message` (its status record says `dueAt` now). */
  extend(message: MessageRef, dueAt: number): boolean {
    const entry = this.inFlight.get(refKey(message));
    if (!entry || this.closing) return false;
    entry.msg.working();
    entry.dueAt = dueAt;
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = this.catchUp(entry.key, entry.msg, entry.waitMs);
    return true;
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /**
   * The agent's time to answer starts when it takes a delivery, but the pull fetches ahead and
   * JetStream's ack wait runs from when it sent: a delivery not taken yet is extended, as the
   * agent's `working` would, once a third of its wait has passed.
   */
  private keepUntaken(): void {
    const now = Date.now();
    for (const entry of this.inFlight.values()) {
      if (entry.taken || entry.dueAt - now > (entry.waitMs * 2) / 3) continue;
      this.host.working(this.agentId, entry.message).catch((error: unknown) => {
        // Settled elsewhere meanwhile (acknowledged through another gateway, expired, given up):
        // not to be handed out, nor kept alive. JetStream's copy, if still pending, comes back
        // after its ack wait and is settled by `prepare`.
        if (isBrokerError(error, "invalid_state", "not_found")) {
          if (this.inFlight.get(entry.key) === entry) this.drop(entry);
          return;
        }
        this.host.warn(
          `inbox ${this.agentId}: could not extend ${entry.message.id} while it waits: ${String(error)}`,
        );
      });
    }
  }

  private async shutdown(): Promise<void> {
    clearInterval(this.keepAlive);
    if (this.held) clearTimeout(this.held.timer);
    this.queue.close();
    // Stop pulling first, so nothing given back can come to this inbox again. Draining the pull's
    // subscription (the consume API supports it) still takes what the server sent before it saw
    // the unsubscribe, such as a message an ack just made room for; the loop collects those into
    // `unprepared`. A plain close would drop them, to come back only after their ack wait.
    const pulls = (this.messages as unknown as { sub?: { drain(): Promise<void> } }).sub;
    if (pulls) await settledWithin(pulls.drain(), DRAIN_TIMEOUT_MS); // NATS unreachable: do not wait for it
    await this.messages.close();
    await this.running;
    await this.handOut;
    for (const [msg, timer] of this.deferred) {
      clearTimeout(timer);
      this.unprepared.push(msg);
    }
    this.deferred.clear();
    await this.giveBackEntries([...this.inFlight.values()], this.unprepared);
    this.host.released(this);
  }

  private async run(): Promise<void> {
    try {
      for await (const msg of this.messages) {
        if (this.closing) {
          this.unprepared.push(msg);
          continue;
        }
        const prepared = this.prepare(msg).catch((error: unknown) => {
          // Left unacknowledged: JetStream redelivers it after the ack wait.
          this.host.warn(
            `inbox ${this.agentId}: could not record delivery of seq ${msg.seq}: ${String(error)}`,
          );
          return null;
        });
        this.handOut = this.handOut.then(async () => {
          const delivery = await prepared;
          if (!this.closing && this.held) {
            if (delivery) this.held.deliveries.push(delivery);
            if (--this.held.left <= 0) this.releaseHeld(this.held);
          } else if (delivery && !this.closing) this.queue.push(delivery);
        });
      }
    } catch (error) {
      if (!this.closing) this.host.warn(`inbox ${this.agentId}: consumer stopped: ${String(error)}`);
    }
    // The consumer ended without close() (deleted on the server): end the iteration so the
    // gateway sees it and can open the inbox again.
    if (!this.closing) void this.close();
  }

  /**
   * Hands out the backlog held at open, highest priority first (one priority in stream order). Runs
   * once, before any close: the close stops its timer, and the hand-out chain calls it only while
   * the inbox is open (a closed queue would drop what it pushes anyway).
   */
  private releaseHeld(held: HeldBacklog): void {
    this.held = null;
    clearTimeout(held.timer);
    const { deliveries } = held;
    for (let next = takeNext(deliveries, deliveryRank); next; next = takeNext(deliveries, deliveryRank)) {
      this.queue.push(next);
    }
  }

  private async prepare(msg: JsMsg): Promise<Delivery | null> {
    const headers = readHeaders(msg);
    // `term()` without a reason: nats-server before 2.10 ignores a `+TERM` that carries one, and
    // the message would stay pending (holding one of maxInFlight's slots) and come back forever.
    if (!headers) {
      msg.term(); // not an ACP message
      return null;
    }
    const now = Date.now();
    const { policy } = this.host;
    if (now >= expiresAtMs(policy, headers.queuedAt)) {
      msg.term(); // expired
      return null;
    }
    // JetStream sent it again: any earlier hand-out of it here is over.
    const key = refKey(headers);
    const earlier = this.inFlight.get(key);
    if (earlier) this.forget(earlier);
    const ackSubject = replySubject(msg);
    // A route whose gateway is gone holds nothing (asked only about another instance, briefly cached).
    const routeAlive = headers.route ? await this.host.instanceAlive(instanceOfRoute(headers.route)) : false;
    const context: HandOutContext = {
      policy,
      instanceId: this.host.instanceId,
      msg,
      headers,
      ackSubject,
      routeAlive,
      countsUsage: this.host.ledger !== undefined,
      now,
    };
    const decide = (current: Versioned<StatusDoc> | null) => decideHandOut(current, context);
    let decision = await this.host.statuses.mutate(headers, decide);
    if (decision.outcome === "again") decision = await this.host.statuses.mutate(headers, decide);
    switch (decision.outcome) {
      case "again":
        return null; // deleted again meanwhile: left for redelivery
      case "ack":
        msg.ack();
        return null;
      case "defer":
        this.defer(msg, headers, decision.untilMs - now);
        return null;
      case "dead":
        this.host.pendingSettled(decision.record);
        msg.term(); // max deliveries
        return null;
      case "term":
        msg.term(); // already settled
        return null;
    }
    const wait = ackWaitFor(policy, decision.attempt);
    this.inFlight.set(key, {
      key,
      message: { from: headers.from, id: headers.id },
      msg,
      ackSubject,
      dueAt: now + wait,
      waitMs: wait,
      timer: this.catchUp(key, msg, wait),
      taken: false,
    });
    return toDelivery(msg, headers, decision.attempt, wait);
  }

  /**
   * A message its route holds (routed.ts) stays here, unacknowledged, and is looked at again within
   * a second, as the route's gateway writes its record: settled by then (acknowledged silently),
   * still held, or given up (handed out from the queue). Meanwhile JetStream is told it is being
   * worked on. (A `nak` with a delay would do it without holding it here, but on a consumer with a
   * backoff list JetStream adds the backoff of the delivery count to the delay.)
   */
  private defer(msg: JsMsg, message: MessageRef, deferMs: number): void {
    this.host.statuses.forget(message);
    const timer = setTimeout(
      () => {
        this.deferred.delete(msg);
        if (this.closing) {
          this.unprepared.push(msg);
          return;
        }
        const prepared = this.lookAgain(msg);
        this.handOut = this.handOut.then(async () => {
          const delivery = await prepared;
          // Given up by its route: what it held from the same sender before it may have been given
          // up with it (one give-back) since this inbox looked at it; that goes out first.
          const before = delivery ? this.deferredBefore(msg, delivery.from) : [];
          const earlier = await Promise.all(before.map((held) => this.lookAgain(held)));
          for (const next of [...earlier, delivery]) if (next && !this.closing) this.queue.push(next);
        });
      },
      Math.min(deferMs + ROUTE_DEFER_MARGIN_MS, ROUTE_RECHECK_MS),
    );
    timer.unref();
    this.deferred.set(msg, timer);
  }

  /** A held message looked at again: its delivery if its route gave it up, else null (held again, settled). */
  private lookAgain(msg: JsMsg): Promise<Delivery | null> {
    msg.working();
    return this.prepare(msg).catch(() => null);
  }

  /** Takes the messages held here from `from` that came before `msg` off their timers, in stream order. */
  private deferredBefore(msg: JsMsg, from: string): JsMsg[] {
    const before = [...this.deferred].filter(
      ([held]) => held.seq < msg.seq && readHeaders(held)?.from === from,
    );
    for (const [held, timer] of before) {
      clearTimeout(timer);
      this.deferred.delete(held);
    }
    return before.map(([held]) => held).sort((a, b) => a.seq - b.seq);
  }

  /**
   * JetStream takes its ack wait from its own delivery count, which also counts hand-outs given
   * back, so after a close it can wait longer than the policy says for this attempt. Then the inbox
   * redelivers on time itself. Only when JetStream's wait is clearly longer, so the two never race.
   */
  private catchUp(key: string, msg: JsMsg, waitMs: number): NodeJS.Timeout | null {
    const serverWaitMs = ackWaitFor(this.host.policy, msg.info.deliveryCount);
    if (serverWaitMs - waitMs < CATCH_UP_MARGIN_MS) return null;
    const timer = setTimeout(() => {
      const entry = this.inFlight.get(key);
      if (entry?.msg !== msg || this.closing) return;
      this.inFlight.delete(key);
      msg.nak();
    }, waitMs);
    timer.unref();
    return timer;
  }

  private forget(entry: InFlight): void {
    if (entry.timer) clearTimeout(entry.timer);
    this.inFlight.delete(entry.key);
  }

  /** Forgets a delivery settled while it waited in the queue, and takes it out of the queue. */
  private drop(entry: InFlight): void {
    this.forget(entry);
    if (!entry.taken) this.queue.discard((delivery) => refKey(delivery) === entry.key);
  }

  /** Gives these deliveries back for immediate redelivery (see give-back.ts). */
  async giveBack(messages: readonly MessageRef[]): Promise<void> {
    const entries = messages.flatMap((message) => this.inFlight.get(refKey(message)) ?? []);
    if (entries.length > 0) await this.giveBackEntries(entries, []);
  }

  /** Every hand-out given back (see give-back.ts), with what was pulled while closing. */
  private async giveBackEntries(entries: readonly InFlight[], unprepared: readonly JsMsg[]): Promise<void> {
    for (const entry of entries) this.forget(entry);
    await giveBackDeliveries(this.agentId, entries, unprepared, this.host);
  }

  reclaim(): void {
    this.host.reclaim(this.agentId);
  }
}
