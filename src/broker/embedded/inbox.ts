import { DeliveryQueue, takeNext } from "../delivery-queue.js";
import { ackWaitFor, expiresAtMs, maxDeliveriesDetail } from "../policy.js";
import type { Delivery, Inbox, MessageRef } from "../types.js";
import { refKey } from "../validation.js";
import { giveBackRows, type HandOut, type HandOutHost, handOut, recordDelivery } from "./hand-outs.js";
import { type LoadedMessage, rowKey, toDelivery } from "./messages.js";

/** Rows read from the database at a time; also the most rows an inbox keeps in memory ahead of delivery. */
const PAGE = 256;

/** What an inbox needs from its broker. */
export interface InboxHost extends HandOutHost {
  /** Marks a message failed after its last delivery attempt, with why. */
  deadLetter(row: LoadedMessage, detail: string): void;
  /** The message is out through the agent's routed receiver: not this inbox's to hand out. */
  isRouted(row: LoadedMessage): boolean;
  /** The inbox closed: the broker forgets it. */
  released(inbox: EmbeddedInbox): void;
}

interface InFlight extends HandOut {
  timer: NodeJS.Timeout;
}

/**
 * One agent's inbox in this process. Messages come from two sources that never overlap: pages read
 * from the database (`seq` above `lastSeq`) and rows offered right after their submit committed,
 * accepted only while everything older is already in memory. A message is handed out when the
 * consumer asks for the next one, and each hand-out arms an ack timer (`extend` restarts it); when
 * it fires the message is next in line again: redelivered, or dead-lettered after `maxDeliver`
 * deliveries. Closing the inbox gives its hand-outs back, due at once for the next open (see `giveBack`).
 */
export class EmbeddedInbox implements Inbox {
  private readonly queue: DeliveryQueue<Delivery>;
  private readonly waiting: LoadedMessage[] = [];
  private readonly inFlight = new Map<string, InFlight>();
  private lastSeq = 0;
  private caughtUp = false;
  private closed = false;
  /** The oldest orphaned delivery found (see `orphaned`) has been counted as an attempt. */
  private orphanCounted = false;

  constructor(
    readonly agentId: string,
    private readonly maxInFlight: number,
    private readonly host: InboxHost,
  ) {
    this.queue = new DeliveryQueue<Delivery>(
      () => this.close(),
      (delivery) => {
        const entry = this.inFlight.get(refKey(delivery));
        if (entry) entry.taken = true;
      },
      () => this.pump(),
    );
  }

  [Symbol.asyncIterator](): AsyncIterator<Delivery> {
    return this.queue[Symbol.asyncIterator]();
  }

  start(): void {
    this.pump();
  }

  /** A message to this agent was just committed. */
  offer(row: LoadedMessage): void {
    if (this.closed || row.seq <= this.lastSeq) return;
    if (!this.caughtUp || this.waiting.length >= PAGE) {
      // The database has it; the pager reads it in order when memory has room again.
      this.caughtUp = false;
      this.pump();
      return;
    }
    this.lastSeq = row.seq;
    this.waiting.push(row);
    this.pump();
  }

  /**
   * The in-memory row of a message this inbox holds (handed out or about to be), so the broker can
   * settle it without reading the database. It is the one copy: the broker updates it in place.
   */
  live(message: MessageRef): LoadedMessage | undefined {
    return (
      this.inFlight.get(refKey(message))?.row ??
      this.waiting.find((row) => row.id === message.id && row.sender === message.from)
    );
  }

  /**
   * The agent is still working on delivery `message`: its ack wait starts again. False when this
   * inbox does not hold it out.
   */
  extend(message: MessageRef): boolean {
    const key = refKey(message);
    const entry = this.inFlight.get(key);
    if (!entry || this.closed) return false;
    const { row } = entry;
    const wait = ackWaitFor(this.host.policy, row.attempts);
    clearTimeout(entry.timer);
    entry.timer = this.ackTimer(key, wait);
    row.next_attempt_at = Date.now() + wait;
    recordDelivery(row, this.host);
    return true;
  }

  async giveBack(messages: readonly MessageRef[]): Promise<void> {
    const entries: InFlight[] = [];
    for (const message of messages) {
      const key = refKey(message);
      const entry = this.inFlight.get(key);
      if (!entry) continue;
      clearTimeout(entry.timer);
      this.inFlight.delete(key);
      entries.push(entry);
    }
    entries.sort((a, b) => a.row.seq - b.row.seq);
    giveBackRows(entries, this.host);
    this.requeue(entries.map((entry) => entry.row));
  }

  /** Nothing to do: one process owns the database, and its first inbox of an agent took over what a dead one held. */
  reclaim(): void {}

  /**
   * `rows` are due again (given back by its consumer or its routed receiver): they go back in line
   * in seq order (the next hand-out takes the highest priority waiting, see `pump`), all of them
   * before the next hand-out, so a consumer waiting now gets the oldest, not the first placed.
   */
  requeue(rows: readonly LoadedMessage[]): void {
    for (const row of rows) this.place(row);
    this.pump();
  }

  /** Puts `row` back in line by its seq, or leaves it to the pager if no page has reached it yet. */
  private place(row: LoadedMessage): void {
    if (this.closed || this.inFlight.has(rowKey(row))) return;
    if (row.seq > this.lastSeq) {
      // Not paged yet: the pager reads it from the database, which must have its state first.
      this.host.commits.flush();
      this.caughtUp = false;
      return;
    }
    const at = this.waiting.findIndex((waiting) => waiting.seq > row.seq);
    if (at === -1) this.waiting.push(row);
    else this.waiting.splice(at, 0, row);
  }

  /** The message was acknowledged or rejected through the broker: stop tracking it. */
  settled(message: MessageRef): void {
    const key = refKey(message);
    const entry = this.inFlight.get(key);
    if (entry) {
      clearTimeout(entry.timer);
      this.inFlight.delete(key);
      this.pump();
      return;
    }
    const index = this.waiting.findIndex((row) => row.id === message.id && row.sender === message.from);
    if (index >= 0) this.waiting.splice(index, 1);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const entries = [...this.inFlight.values()];
    for (const entry of entries) clearTimeout(entry.timer);
    giveBackRows(
      entries.sort((a, b) => a.row.seq - b.row.seq),
      this.host,
    );
    this.inFlight.clear();
    this.waiting.length = 0;
    this.queue.close();
    this.host.released(this);
    // Delivery bookkeeping (attempts, next due time) must be on disk for the next open.
    this.host.commits.flush();
  }

  /** Hands out the next deliverable message when the consumer asks for one (its ack wait starts then). */
  private pump(): void {
    while (!this.closed && this.queue.wanted && this.inFlight.size < this.maxInFlight) {
      if (this.waiting.length === 0) {
        if (this.caughtUp) return;
        this.readPage();
        continue;
      }
      const row = takeNext(this.waiting, (waiting) => waiting.priority)!;
      const now = Date.now();
      if (now >= expiresAtMs(this.host.policy, row.queued_at)) continue; // the sweep marks it expired
      if (row.attempts >= this.host.policy.maxDeliver) {
        this.host.deadLetter(row, maxDeliveriesDetail(row.attempts));
        continue;
      }
      this.deliver(row, now);
    }
  }

  private readPage(): void {
    const rows = this.host.table.unsettled(this.agentId, this.lastSeq, PAGE);
    if (rows.length < PAGE) this.caughtUp = true;
    const now = Date.now();
    for (const row of rows) {
      this.lastSeq = row.seq;
      if (this.host.isRouted(row)) continue;
      if (row.status === "delivered" && row.next_attempt_at !== null && row.next_attempt_at > now) {
        this.orphaned(row, now);
      }
      this.waiting.push(row);
    }
  }

  /**
   * A delivery still inside its ack wait that no inbox of this process holds was handed out by a
   * process that died (one process owns the database, and a closing inbox gives its hand-outs back
   * as due): its socket died with it, so waiting out the ack wait would only delay it. It goes out
   * again now, counted as a close would count it: the oldest one as an attempt, the others not.
   */
  private orphaned(row: LoadedMessage, now: number): void {
    if (this.orphanCounted) {
      row.attempts -= 1;
      row.next_attempt_at = null;
    } else {
      this.orphanCounted = true;
      row.next_attempt_at = now;
    }
  }

  private deliver(row: LoadedMessage, now: number): void {
    const wait = handOut(row, now, this.host);
    const key = rowKey(row);
    this.inFlight.set(key, { row, timer: this.ackTimer(key, wait), taken: false });
    this.queue.push(toDelivery(row, wait));
  }

  private ackTimer(key: string, waitMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => this.ackWaitEnded(key), waitMs);
    timer.unref();
    return timer;
  }

  private ackWaitEnded(key: string): void {
    const entry = this.inFlight.get(key);
    // Settled in memory, its write still in the batch: `settled()` follows the commit.
    if (!entry || this.closed || entry.row.status !== "delivered") return;
    this.inFlight.delete(key);
    const { row } = entry;
    if (Date.now() >= expiresAtMs(this.host.policy, row.queued_at)) {
      // the sweep marks it expired
    } else if (row.attempts >= this.host.policy.maxDeliver) {
      this.host.deadLetter(row, maxDeliveriesDetail(row.attempts));
    } else {
      this.waiting.unshift(row); // next in line: redelivered when the consumer asks for a message
    }
    this.pump();
  }
}
