import { AcpError } from "./errors.js";

export interface ReplayGuardOptions {
  /** Allowed clock skew either side of now, in ms (default ±5 minutes). */
  skewMs?: number;
  now?: () => number;
}

/**
 * Replay protection: a message is accepted only if its timestamp lies within ±skew of now and its
 * message-id was not seen within that window. An id only needs remembering until its timestamp
 * leaves the window (after that the timestamp check refuses it), so memory is bounded by the
 * message rate times twice the window.
 */
export class ReplayGuard {
  readonly skewMs: number;
  private readonly now: () => number;
  /** message-id → time after which it can be forgotten. */
  private readonly seen = new Map<string, number>();
  private nextPrune = 0;

  constructor(options: ReplayGuardOptions = {}) {
    this.skewMs = options.skewMs ?? 5 * 60_000;
    this.now = options.now ?? Date.now;
  }

  /** Throws StaleTimestamp or Replay; otherwise records the id. */
  check(messageId: string, timestamp: string, path = "/params/headers"): void {
    this.checkTimestamp(timestamp, path);
    const now = this.now();
    if (now >= this.nextPrune) this.prune(now);
    const forgetAt = this.seen.get(messageId);
    if (forgetAt !== undefined && forgetAt > now) {
      throw new AcpError("Replay", `message-id ${messageId} was already received`, {
        problems: [{ path: `${path}/message-id`, message: "already seen within the replay window" }],
      });
    }
    this.seen.set(messageId, Date.parse(timestamp) + 2 * this.skewMs);
  }

  /** `receivedAt`: judge it as of that time (a message the receiver took in earlier and held). */
  checkTimestamp(timestamp: string, path = "/params/headers", receivedAt = this.now()): void {
    const at = Date.parse(timestamp);
    const drift = at - receivedAt;
    if (!Number.isFinite(at) || Math.abs(drift) > this.skewMs) {
      throw new AcpError(
        "StaleTimestamp",
        `timestamp ${timestamp} is outside the ±${this.skewMs / 1000}s window`,
        {
          problems: [
            { path: `${path}/timestamp`, message: `${Math.round(drift / 1000)}s from the receiver's clock` },
          ],
          skewMs: this.skewMs,
        },
      );
    }
  }

  /**
   * For a message that waited in a queue before it got here (a peer gateway's store and forward):
   * no further in the future than the skew, no older than `maxAgeMs` plus the skew.
   */
  checkAge(timestamp: string, maxAgeMs: number, path = "/params/headers"): void {
    const at = Date.parse(timestamp);
    const age = this.now() - at;
    if (!Number.isFinite(at) || age < -this.skewMs || age > maxAgeMs + this.skewMs) {
      throw new AcpError(
        "StaleTimestamp",
        `timestamp ${timestamp} is outside the window of ${this.skewMs / 1000}s ahead to ${Math.round((maxAgeMs + this.skewMs) / 1000)}s behind`,
        {
          problems: [
            { path: `${path}/timestamp`, message: `${Math.round(-age / 1000)}s from the receiver's clock` },
          ],
          skewMs: this.skewMs,
          maxAgeMs,
        },
      );
    }
  }

  /** How many message ids it remembers now (those still inside the timestamp window, about). */
  get size(): number {
    return this.seen.size;
  }

  private prune(now: number): void {
    for (const [id, forgetAt] of this.seen) if (forgetAt <= now) this.seen.delete(id);
    this.nextPrune = now + Math.min(this.skewMs, 30_000);
  }
}
