/** A run of failed storage writes, as `health()` reports it. */
export interface WriteFailure {
  /** What went wrong, for people: `write failed: disk full (SQLITE_FULL)`. */
  cause: string;
  /** When the run began (ms since the epoch): the first failure after the last good write. */
  since: number;
}

/**
 * Remembers the current run of failed storage writes for `health()`: from the first failure until a
 * write succeeds again. A store that cannot try a harmless write by itself (NATS: every write to a
 * stream stores something) passes `forgetAfterMs`: the run then also ends that long after its last
 * failure, so a gateway taken out of service for it is tried again.
 */
export class WriteFailures {
  private run: (WriteFailure & { last: number }) | undefined;

  constructor(private readonly forgetAfterMs = Number.POSITIVE_INFINITY) {}

  failed(cause: string, now = Date.now()): void {
    this.run = { cause, since: this.current(now)?.since ?? now, last: now };
  }

  succeeded(): void {
    this.run = undefined;
  }

  /** The run still in force at `now`, if any. */
  current(now = Date.now()): WriteFailure | undefined {
    if (this.run && now - this.run.last >= this.forgetAfterMs) this.run = undefined;
    return this.run && { cause: this.run.cause, since: this.run.since };
  }
}
