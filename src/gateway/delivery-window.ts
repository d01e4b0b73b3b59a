import type { Delivery, MessageRef } from "../broker/index.js";
import { refKey } from "../broker/validation.js";

interface Outstanding {
  message: MessageRef;
  ackWaitMs: number;
  /** When the broker takes the delivery back if the socket says nothing more about it. */
  until: number;
}

/**
 * What one socket may still be sent: its window (`maxAckPending`, an AMQP prefetch count) less the
 * deliveries it has not acknowledged or rejected yet. A delivery also leaves the window when its
 * ack wait ends without a word from the socket (`working` restarts that wait): by then the broker
 * has taken it back, to redeliver or dead-letter it, as JetStream frees `max_ack_pending`.
 * `onRoom` is called whenever the window may have room again.
 */
export class DeliveryWindow {
  /** By `refKey`: message ids are per sender. */
  private readonly outstanding = new Map<string, Outstanding>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private size: number,
    private readonly onRoom: () => void,
  ) {}

  get maxAckPending(): number {
    return this.size;
  }

  get hasRoom(): boolean {
    if (this.outstanding.size < this.size) return true;
    const now = Date.now();
    for (const [id, entry] of this.outstanding) if (entry.until <= now) this.outstanding.delete(id);
    return this.outstanding.size < this.size;
  }

  /** The deliveries the socket holds (not acknowledged, their ack waits not over). */
  held(): MessageRef[] {
    const now = Date.now();
    return [...this.outstanding.values()].filter((entry) => entry.until > now).map((entry) => entry.message);
  }

  sent(delivery: Delivery): void {
    this.outstanding.set(refKey(delivery), {
      message: { from: delivery.from, id: delivery.id },
      ackWaitMs: delivery.ackWaitMs,
      until: Date.now() + delivery.ackWaitMs,
    });
    if (!this.hasRoom) this.watchExpiries();
  }

  /** Acknowledged or rejected (or refused: either way the socket is done with it). */
  settled(message: MessageRef): void {
    if (this.outstanding.delete(refKey(message))) this.onRoom();
  }

  /** Handed to another socket of the agent since: no longer this one's. */
  forget(message: MessageRef): void {
    this.outstanding.delete(refKey(message));
  }

  /** The socket is still working on `message`: its ack wait started again. */
  working(message: MessageRef): void {
    const entry = this.outstanding.get(refKey(message));
    if (entry) entry.until = Date.now() + entry.ackWaitMs;
  }

  resize(size: number): void {
    this.size = size;
    this.onRoom();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** While full, wakes `onRoom` when the soonest ack wait ends. */
  private watchExpiries(): void {
    if (this.timer) return;
    let soonest = Number.POSITIVE_INFINITY;
    for (const entry of this.outstanding.values()) soonest = Math.min(soonest, entry.until);
    if (!Number.isFinite(soonest)) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        if (this.hasRoom) this.onRoom();
        else this.watchExpiries();
      },
      Math.max(0, soonest - Date.now()) + 1,
    );
    this.timer.unref();
  }
}
