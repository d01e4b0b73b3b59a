import type { Delivery, MessageRef } from "../broker/index.js";
import { refKey } from "../broker/validation.js";

interface Outstanding {
  ackWaitMs: number;
  /** When the broker takes the delivery back if the socket says nothing more about it. */
  until: number;
}

/**
 * What one socket may still be sent: its window (`maxAckPending`, an AMQP prefetch count) less the
 * deliveries it has not acknowledged or rejected yet. A delivery also leaves the window when its
 * ack wait ends without a word from the socket (`working` restarts that wait): by then the broker
 * has taken it back, to redeliver or dead-letter it, as JetStream frees `max_ack_pending`.
 */
export class DeliveryWindow {
  /** By `refKey`: message ids are per sender. */
  private readonly outstanding = new Map<string, Outstanding>();
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private size: number) {}

  get maxAckPending(): number {
    return this.size;
  }

  get hasRoom(): boolean {
    if (this.outstanding.size < this.size) return true;
    const now = Date.now();
    for (const [id, entry] of this.outstanding) if (entry.until <= now) this.outstanding.delete(id);
    return this.outstanding.size < this.size;
  }

  sent(delivery: Delivery): void {
    this.outstanding.set(refKey(delivery), {
      ackWaitMs: delivery.ackWaitMs,
      until: Date.now() + delivery.ackWaitMs,
    });
  }

  /** Acknowledged or rejected (or refused: either way the socket is done with it). */
  settled(message: MessageRef): void {
    if (this.outstanding.delete(refKey(message))) this.notify();
  }

  /** The socket is still working on `message`: its ack wait started again. */
  working(message: MessageRef): void {
    const entry = this.outstanding.get(refKey(message));
    if (entry) entry.until = Date.now() + entry.ackWaitMs;
  }

  resize(size: number): void {
    this.size = size;
    this.notify();
  }

  /** Resolves when the window may have room again: a settlement, a resize, an ack wait's end, or `notify`. */
  untilRoom(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      let soonest = Number.POSITIVE_INFINITY;
      for (const entry of this.outstanding.values()) soonest = Math.min(soonest, entry.until);
      if (Number.isFinite(soonest)) {
        this.timer = setTimeout(() => this.notify(), Math.max(0, soonest - Date.now()) + 1);
        this.timer.unref();
      }
    });
  }

  /** Wakes whoever waits in `untilRoom`. */
  notify(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
