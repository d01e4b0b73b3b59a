import type { Delivery } from "../broker/index.js";

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
    this.outstanding.set(delivery.id, {
      ackWaitMs: delivery.ackWaitMs,
      until: Date.now() + delivery.ackWaitMs,
    });
  }

  /** Acknowledged or rejected (or refused: either way the socket is done with it). */
  settled(id: string): void {
    if (this.outstanding.delete(id)) this.notify();
  }

  /** The socket is still working on `id`: its ack wait started again. */
  working(id: string): void {
    const entry = this.outstanding.get(id);
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
