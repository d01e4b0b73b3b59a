import { BrokerError } from "../broker/errors.js";
import { refKey } from "../broker/validation.js";
import type { ClientFrame } from "../wire/api.js";

/** An `acknowledge` or `reject` frame: the agent's decision on one delivered message. */
export type SettleFrame = Extract<ClientFrame, { type: "acknowledge" | "reject" }>;

export interface SettleRetryLimits {
  /** Decisions tried again at once (default 256, the largest window); past it the redelivery repairs. */
  maxPending?: number;
  /** How long one decision is tried again (default 30 s, a first delivery's default ack wait). */
  giveUpAfterMs?: number;
  /** The clock (tests). */
  now?: () => number;
}

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 4_000;

/**
 * Acknowledgements and rejections the broker could not store for a moment (unavailable: a NATS
 * stream-leader election, a lost connection) are tried again in the background, 250 ms after the
 * failure and then twice as long each time (up to 4 s), until stored, refused for good, or
 * `giveUpAfterMs` has passed. The agent made its decision and will not repeat it (a WebSocket ack
 * is not answered); without this, the message would stay out for delivery until its ack wait ran
 * out, come back as a redelivery, and on a consumer whose deliveries were counted up by the
 * election wait longer each time. The redelivery still repairs what this gives up on.
 */
export class SettleRetries {
  readonly #pending = new Map<string, NodeJS.Timeout>();
  readonly #maxPending: number;
  readonly #giveUpAfterMs: number;
  readonly #now: () => number;
  #closed = false;

  constructor(
    private readonly settle: (frame: SettleFrame) => Promise<void>,
    private readonly outcome: (result: "settled" | "given-up") => void,
    limits: SettleRetryLimits = {},
  ) {
    this.#maxPending = limits.maxPending ?? 256;
    this.#giveUpAfterMs = limits.giveUpAfterMs ?? 30_000;
    this.#now = limits.now ?? Date.now;
  }

  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Tries `frame` again later if `failure` is one that passes (the broker unavailable). True when
   * it will be tried again (or already is).
   */
  retry(frame: SettleFrame, failure: unknown): boolean {
    if (this.#closed || !isPassing(failure)) return false;
    const key = refKey(frame);
    if (this.#pending.has(key)) return true;
    if (this.#pending.size >= this.#maxPending) return false;
    this.#schedule(key, frame, FIRST_DELAY_MS, this.#now() + this.#giveUpAfterMs);
    return true;
  }

  /** Stops trying (the socket ended): what was not stored yet is redelivered. */
  close(): void {
    this.#closed = true;
    for (const timer of this.#pending.values()) clearTimeout(timer);
    this.#pending.clear();
  }

  #schedule(key: string, frame: SettleFrame, delayMs: number, giveUpAt: number): void {
    const timer = setTimeout(() => void this.#attempt(key, frame, delayMs, giveUpAt), delayMs);
    timer.unref();
    this.#pending.set(key, timer);
  }

  async #attempt(key: string, frame: SettleFrame, delayMs: number, giveUpAt: number): Promise<void> {
    try {
      await this.settle(frame);
      this.#pending.delete(key);
      this.outcome("settled");
    } catch (err) {
      if (this.#closed) return;
      const next = Math.min(delayMs * 2, MAX_DELAY_MS);
      if (!isPassing(err) || this.#now() + next > giveUpAt) {
        this.#pending.delete(key);
        this.outcome("given-up");
        return;
      }
      this.#schedule(key, frame, next, giveUpAt);
    }
  }
}

/** The broker could not do it now, and may later (not: refused, or the broker closed for good). */
function isPassing(err: unknown): boolean {
  return err instanceof BrokerError && err.kind === "unavailable";
}
