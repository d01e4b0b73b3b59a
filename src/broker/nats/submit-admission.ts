import { BrokerError } from "../errors.js";

/** Submissions being stored at once, by default (nats.go's `PublishAsyncMaxPending` is 4,000 publishes). */
export const DEFAULT_MAX_PENDING_SUBMITS = 1_000;
/** How long a submission waits for its turn, by default, before it is refused. */
export const DEFAULT_SUBMIT_STALL_MS = 5_000;

interface Waiting {
  start: () => void;
  refuse: (error: BrokerError) => void;
  since: number;
}

/**
 * Bounds the submissions a gateway has in JetStream at once. Without a bound, a gateway offered more
 * than NATS stores queues every submission's writes on the server; the delivery and ack writes queue
 * behind them, time out, and nothing is delivered at all (measured: 5,000 agents at 1 msg/s each,
 * 0 delivered). With it, deliveries keep flowing at what NATS can store, and submissions beyond it
 * wait their turn in arrival order (so a sender's order is kept); one that waited `stallMs` is
 * refused as `unavailable` before anything was stored, so its sender retries later.
 *
 * Only new submissions are bounded: status writes and acks of messages already stored are never held.
 */
export class SubmitAdmission {
  #running = 0;
  readonly #waiting: Waiting[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly max: number,
    private readonly stallMs: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(max) || max < 1)
      throw new BrokerError("invalid_argument", "nats.maxPendingSubmits must be a positive integer", {
        field: "nats.maxPendingSubmits",
      });
    if (!Number.isFinite(stallMs) || stallMs < 0)
      throw new BrokerError("invalid_argument", "nats.submitStallMs must be a number of milliseconds ≥ 0", {
        field: "nats.submitStallMs",
      });
  }

  /** Submissions being stored now, and waiting for their turn. */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting.length };
  }

  /** Runs `store` when a place is free (at once if one is and nobody waits). */
  run<T>(store: () => Promise<T>): Promise<T> {
    if (this.#running < this.max && this.#waiting.length === 0) return this.#start(store);
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push({
        start: () => this.#start(store).then(resolve, reject),
        refuse: reject,
        since: this.now(),
      });
      this.#timer ??= setInterval(() => this.#refuseStalled(), Math.max(10, this.stallMs / 4)).unref();
    });
  }

  /** Refuses everything still waiting (the broker is closing). */
  close(): void {
    for (const waiting of this.#waiting.splice(0))
      waiting.refuse(new BrokerError("closed", "the broker is closed"));
    this.#stopTimer();
  }

  #start<T>(store: () => Promise<T>): Promise<T> {
    this.#running += 1;
    let stored: Promise<T>;
    try {
      stored = store();
    } catch (error) {
      stored = Promise.reject(error);
    }
    return stored.finally(() => {
      this.#running -= 1;
      this.#next();
    });
  }

  #next(): void {
    while (this.#running < this.max) {
      const waiting = this.#waiting.shift();
      if (!waiting) break;
      waiting.start();
    }
    if (this.#waiting.length === 0) this.#stopTimer();
  }

  #refuseStalled(): void {
    const oldest = this.now() - this.stallMs;
    let stalled = 0;
    while (stalled < this.#waiting.length && (this.#waiting[stalled] as Waiting).since <= oldest) stalled++;
    const waited = Math.round(this.stallMs / 100) / 10;
    for (const waiting of this.#waiting.splice(0, stalled)) {
      waiting.refuse(
        new BrokerError(
          "unavailable",
          `NATS is not keeping up: the message waited ${waited} s for one of the ${this.max} places for submissions being stored, and was not accepted; submit it again later`,
        ),
      );
    }
    if (this.#waiting.length === 0) this.#stopTimer();
  }

  #stopTimer(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
