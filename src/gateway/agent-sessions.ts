import type { Logger } from "pino";
import type { Broker, Delivery, Inbox, MessageRef, RoutedReceiver } from "../broker/index.js";
import { refKey } from "../broker/validation.js";

/** What the agent's sessions are to the group that feeds them (ws-session.ts). */
export interface GroupMember {
  /** Unique among this gateway's sockets; its route is `<broker instance>/<id>`. */
  readonly id: string;
  /** A receiving socket takes a share of the agent's queue; a replies-only one only what is routed to it. */
  readonly receives: boolean;
  /** Open, with room in its window and its send buffer. */
  readonly canTake: boolean;
  /** Sends `delivery`; false when the socket is gone. */
  deliver(delivery: Delivery): boolean;
  /** Done with `message` (acknowledged, rejected). */
  settled(message: MessageRef): void;
  /** `message` went to another socket of the agent since. */
  forget(message: MessageRef): void;
  /** The deliveries it holds: from the queue, and routed to it. */
  handedOut(): { queue: MessageRef[]; routed: MessageRef[] };
}

/** Backoff between attempts to open again an inbox that ended on its own. */
const REOPEN_FIRST_DELAY_MS = 100;
const REOPEN_MAX_DELAY_MS = 30_000;

/**
 * One agent's sockets at this gateway, as several consumers of one agent (NATS queue subscribers,
 * AMQP consumers of one queue). While a receiving socket is connected the group holds the agent's
 * broker inbox and shares its deliveries out among the receiving sockets with room in their window
 * (a work queue: each delivery to one of them, in turn). The messages routed to one socket (the
 * answers to the requests it sent, the handshake replies to its announces) go to that socket
 * whether it receives or not, outside its window; a socket gone before they came, or before it
 * acknowledged them, gives them back to the queue. A socket that leaves gives back what it holds.
 */
export class AgentSessions {
  private readonly members = new Map<string, GroupMember>();
  /** Delivery (`refKey`) → the socket it went to. */
  private readonly holders = new Map<string, GroupMember>();
  private inbox: Inbox | undefined;
  private pump: Promise<void> | undefined;
  private routed: RoutedReceiver | undefined;
  /** Opening and closing the inbox and receiver, one change at a time. */
  private changes: Promise<void> = Promise.resolve();
  private wakeUp: (() => void) | undefined;
  private turn = 0;
  private reopenAttempt = 0;

  constructor(
    readonly agentId: string,
    private readonly deps: { broker: Broker; logger: Logger; maxInFlight: number },
  ) {}

  get size(): number {
    return this.members.size;
  }

  /** Counts `member` in at once (the per-agent limit); `join` then opens what it needs. */
  reserve(member: GroupMember): void {
    this.members.set(member.id, member);
  }

  /** Opens the routed receiver, and the inbox for a receiving socket; throws if the broker cannot. */
  async join(member: GroupMember): Promise<void> {
    await this.change(async () => {
      this.routed ??= this.deps.broker.receiveRouted(this.agentId, (delivery) => this.onRouted(delivery));
      if (!member.receives) return;
      if (this.inbox) {
        // A socket of the agent just arrived: it may be one a gateway that died had served.
        this.inbox.reclaim();
        return;
      }
      await this.openInbox();
    });
    this.wake();
  }

  private async openInbox(): Promise<void> {
    const inbox = await this.deps.broker.openInbox(this.agentId, { maxInFlight: this.deps.maxInFlight });
    this.inbox = inbox;
    this.reopenAttempt = 0;
    this.pump = this.dispatch(inbox);
  }

  /**
   * The inbox ended on its own while receiving sockets were still here (its consumer went away on
   * the broker): open it again for them, retrying with backoff while the broker refuses.
   */
  private reopen(ended: Inbox | undefined): void {
    void this.change(async () => {
      if (this.inbox !== ended) return; // closed or opened again meanwhile
      this.inbox = undefined;
      await ended?.close().catch(() => undefined);
      if (![...this.members.values()].some((m) => m.receives)) return;
      try {
        await this.openInbox();
        this.deps.logger.info({ agent: this.agentId }, "inbox opened again");
      } catch (err) {
        const delayMs = Math.min(REOPEN_MAX_DELAY_MS, REOPEN_FIRST_DELAY_MS * 2 ** this.reopenAttempt++);
        this.deps.logger.warn(
          { agent: this.agentId, err: (err as Error).message, retryInMs: delayMs },
          "inbox could not be opened again",
        );
        setTimeout(() => this.reopen(undefined), delayMs).unref();
      }
    }).then(() => this.wake());
  }

  /** `member` left: what it holds goes back; the inbox closes with the last receiving socket. */
  async leave(member: GroupMember): Promise<void> {
    if (this.members.get(member.id) !== member) return;
    this.members.delete(member.id);
    const { queue, routed } = member.handedOut();
    for (const message of [...queue, ...routed]) {
      const key = refKey(message);
      if (this.holders.get(key) === member) this.holders.delete(key);
    }
    await this.change(async () => {
      if (routed.length > 0) await this.routed?.giveBack(routed);
      const inbox = this.inbox;
      if (inbox && ![...this.members.values()].some((m) => m.receives)) {
        this.inbox = undefined;
        this.wake();
        await inbox.close();
        await this.pump;
      } else if (inbox && queue.length > 0) {
        await inbox.giveBack(queue);
      }
      if (this.members.size === 0 && this.routed) {
        const receiver = this.routed;
        this.routed = undefined;
        await receiver.close();
      }
    });
    this.wake();
  }

  /** A socket may have room again (an ack, a drain, a larger window). */
  wake(): void {
    const wake = this.wakeUp;
    this.wakeUp = undefined;
    wake?.();
  }

  /** `message` was acknowledged or rejected, through any socket of the agent. */
  settled(message: MessageRef): void {
    const key = refKey(message);
    const holder = this.holders.get(key);
    this.holders.delete(key);
    holder?.settled(message);
  }

  private change(work: () => Promise<void>): Promise<void> {
    const done = this.changes.then(work);
    this.changes = done.catch(() => undefined);
    return done;
  }

  /** Takes the queue's deliveries as the receiving sockets have room, and shares them out. */
  private async dispatch(inbox: Inbox): Promise<void> {
    const deliveries = inbox[Symbol.asyncIterator]();
    try {
      while (this.inbox === inbox) {
        if (!this.nextReceiver()) {
          await new Promise<void>((resolve) => {
            this.wakeUp = resolve;
          });
          continue;
        }
        const next = await deliveries.next();
        if (next.done) break;
        const target = this.nextReceiver();
        if (!target || !this.handTo(target, next.value)) await inbox.giveBack([next.value]);
      }
    } catch (err) {
      this.deps.logger.warn({ agent: this.agentId, err: (err as Error).message }, "delivery stopped");
    }
    if (this.inbox === inbox) this.reopen(inbox);
  }

  /** A receiving socket with room, taking turns. */
  private nextReceiver(): GroupMember | undefined {
    const members = [...this.members.values()];
    for (let i = 0; i < members.length; i++) {
      const member = members[(this.turn + i) % members.length]!;
      if (member.receives && member.canTake) {
        this.turn = (this.turn + i + 1) % members.length;
        return member;
      }
    }
    return undefined;
  }

  private onRouted(delivery: Delivery): void {
    const member = this.members.get(delivery.route?.slice(delivery.route.indexOf("/") + 1) ?? "");
    if (!member || !this.handTo(member, delivery)) void this.routed?.giveBack([delivery]);
  }

  private handTo(member: GroupMember, delivery: Delivery): boolean {
    const key = refKey(delivery);
    const before = this.holders.get(key);
    if (before && before !== member) before.forget(delivery);
    if (!member.deliver(delivery)) {
      this.holders.delete(key);
      return false;
    }
    this.holders.set(key, member);
    return true;
  }
}
