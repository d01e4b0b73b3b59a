import { priorityRank } from "../protocol/priority.js";
import { BrokerError } from "./errors.js";
import type { Delivery } from "./types.js";

/**
 * Removes and returns the first of the highest-ranked items: a recipient's queue serves higher
 * priorities first, and within one priority keeps its order (redeliveries first, then oldest).
 */
export function takeNext<T>(items: T[], rank: (item: T) => number): T | undefined {
  let best = 0;
  for (let i = 1; i < items.length; i++) if (rank(items[i] as T) > rank(items[best] as T)) best = i;
  return items.length === 0 ? undefined : items.splice(best, 1)[0];
}

/** A delivery's rank for `takeNext`: its priority. */
export const deliveryRank = (delivery: Delivery) => priorityRank(delivery.priority);

/**
 * The async-iterable side of an inbox: the broker pushes deliveries, the gateway pulls them with
 * `for await`. Items still buffered when it closes are dropped on purpose: they are unacknowledged,
 * so the broker redelivers them to the next open inbox.
 */
export class DeliveryQueue<T extends Delivery> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | null = null;
  private closed = false;
  private iterated = false;

  /**
   * `onLeave` runs when the consumer leaves its loop early (break/throw): it closes the inbox.
   * `onTake` runs for each item the consumer receives (handed to the agent, as far as the broker knows).
   * `onDemand` runs when the consumer asks for an item and none is ready: a broker that hands out
   * on demand pushes one now.
   */
  constructor(
    private readonly onLeave: () => Promise<void>,
    private readonly onTake: (item: T) => void,
    private readonly onDemand: () => void = () => undefined,
  ) {}

  get isClosed(): boolean {
    return this.closed;
  }

  /** The consumer is waiting for an item: the next `push` goes straight to it. */
  get wanted(): boolean {
    return this.waiter !== null;
  }

  push(item: T): void {
    if (this.closed) return;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = null;
      this.onTake(item);
      waiter({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** Drops the buffered items `match` picks (settled before the consumer took them). */
  discard(match: (item: T) => boolean): void {
    this.items = this.items.filter((item) => !match(item));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.items = [];
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterated) throw new BrokerError("invalid_state", "an inbox can be iterated only once");
    this.iterated = true;
    return {
      next: () => {
        // Items wait here only while the consumer is busy: the highest priority among them goes next.
        const item = takeNext(this.items, deliveryRank);
        if (item !== undefined) {
          this.onTake(item);
          return Promise.resolve({ value: item, done: false });
        }
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        const next = new Promise<IteratorResult<T>>((resolve) => {
          this.waiter = resolve;
        });
        this.onDemand();
        return next;
      },
      return: async () => {
        await this.onLeave();
        return { value: undefined, done: true };
      },
    };
  }
}
