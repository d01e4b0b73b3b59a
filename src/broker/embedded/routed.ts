import { ackWaitFor, expiresAtMs, maxDeliveriesDetail } from "../policy.js";
import type { Delivery, MessageRef, RoutedReceiver, SubmitInput } from "../types.js";
import { refKey } from "../validation.js";
import { giveBackRows, type HandOutHost, handOut, recordDelivery } from "./hand-outs.js";
import { type LoadedMessage, rowKey, toDelivery } from "./messages.js";

/** What a routed receiver needs from its broker. */
export interface RoutedHost extends HandOutHost {
  /** Marks a message failed after its last delivery attempt, with why. */
  deadLetter(row: LoadedMessage, detail: string): void;
  /** Back in `agentId`'s queue, all of them before its next hand-out (its inbox, if open, hands them out in seq order). */
  requeue(agentId: string, rows: readonly LoadedMessage[]): void;
  /** The receiver closed: the broker forgets it. */
  released(receiver: EmbeddedRouted): void;
}

interface Routed {
  row: LoadedMessage;
  timer: NodeJS.Timeout;
}

/**
 * The deliveries routed to one agent (`SubmitInput.route`): handed to `deliver` as soon as their
 * submit commits, outside the agent's queue. A routed delivery whose ack wait ends goes back to the
 * queue counted, one given back uncounted; either way the agent's inbox hands it out next.
 */
export class EmbeddedRouted implements RoutedReceiver {
  private readonly out = new Map<string, Routed>();
  private closed = false;

  constructor(
    readonly agentId: string,
    private readonly deliver: (delivery: Delivery) => void,
    private readonly host: RoutedHost,
  ) {}

  /** A message routed to this agent was just committed. */
  offer(row: LoadedMessage, route: string): void {
    if (this.closed) return;
    const wait = handOut(row, Date.now(), this.host);
    const key = rowKey(row);
    this.out.set(key, { row, timer: this.ackTimer(key, wait) });
    this.deliver({ ...toDelivery(row, wait), route });
  }

  holds(row: LoadedMessage): boolean {
    return this.out.has(rowKey(row));
  }

  /** The in-memory row of a routed hand-out (the broker settles it in place, as an inbox's). */
  live(message: MessageRef): LoadedMessage | undefined {
    return this.out.get(refKey(message))?.row;
  }

  extend(message: MessageRef): boolean {
    const key = refKey(message);
    const entry = this.out.get(key);
    if (!entry) return false;
    const wait = ackWaitFor(this.host.policy, entry.row.attempts);
    clearTimeout(entry.timer);
    entry.timer = this.ackTimer(key, wait);
    entry.row.next_attempt_at = Date.now() + wait;
    recordDelivery(entry.row, this.host);
    return true;
  }

  /** Acknowledged or rejected through the broker. */
  settled(message: MessageRef): void {
    const key = refKey(message);
    const entry = this.out.get(key);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.out.delete(key);
  }

  async giveBack(messages: readonly MessageRef[]): Promise<void> {
    this.giveBackKeys(messages.map(refKey));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.giveBackKeys([...this.out.keys()]);
    this.closed = true;
    this.host.released(this);
  }

  /** Uncounted, and all back in line before the next hand-out: a consumer waiting gets the oldest, whatever the order of `keys`. */
  private giveBackKeys(keys: readonly string[]): void {
    this.host.requeue(
      this.agentId,
      keys.flatMap((key) => this.release(key, false) ?? []),
    );
  }

  private ackTimer(key: string, waitMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      const row = this.release(key, true);
      if (row) this.host.requeue(this.agentId, [row]);
    }, waitMs);
    timer.unref();
    return timer;
  }

  /**
   * No longer out: counted when its ack wait ran out, uncounted when given back. Returns the row if
   * it goes back to the agent's queue (not settled, expired or dead-lettered meanwhile).
   */
  private release(key: string, timedOut: boolean): LoadedMessage | undefined {
    const entry = this.out.get(key);
    if (!entry) return undefined;
    clearTimeout(entry.timer);
    this.out.delete(key);
    const { row } = entry;
    if (row.status !== "delivered") return undefined; // settled meanwhile, its write in the batch
    if (Date.now() >= expiresAtMs(this.host.policy, row.queued_at)) return undefined; // the sweep marks it expired
    if (timedOut && row.attempts >= this.host.policy.maxDeliver) {
      this.host.deadLetter(row, maxDeliveriesDetail(row.attempts));
      return undefined;
    }
    giveBackRows([{ row, taken: timedOut }], this.host);
    return row;
  }
}

/** Most messages whose answer route is kept at once; past it the oldest are forgotten (their answers go to the queue). */
const MAX_REPLY_ROUTES = 100_000;

/**
 * Where the answers to recent messages go (their `replyTo`), until answered. In memory: routes
 * name sockets of this process, which a restart closes anyway.
 */
export class ReplyRoutes {
  private readonly routes = new Map<string, { replyTo: string; from: string; to: string }>();

  remember(input: SubmitInput): void {
    if (!input.replyTo) return;
    this.routes.set(refKey(input), { replyTo: input.replyTo, from: input.from, to: input.to });
    if (this.routes.size > MAX_REPLY_ROUTES) {
      const oldest = this.routes.keys().next().value;
      if (oldest !== undefined) this.routes.delete(oldest);
    }
  }

  /**
   * The route of the message `input` answers, if that one went from `input.to` to `input.from`. A
   * response ends the exchange (the route is forgotten); a notification about it does not.
   */
  take(input: SubmitInput): string | undefined {
    if (!input.inReplyTo) return undefined;
    // The message answered went from this one's recipient: it is named by that sender and its id.
    const key = refKey({ from: input.to, id: input.inReplyTo });
    const asked = this.routes.get(key);
    if (asked?.from !== input.to || asked.to !== input.from) return undefined;
    if (input.kind === "response") this.routes.delete(key);
    return asked.replyTo;
  }
}
