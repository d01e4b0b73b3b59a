/**
 * Bounds how many tasks run at once: an agent's handlers (`flow.concurrency`), an orchestrator's
 * commands (`performance.max_parallel`). Waiters are served in arrival order; a waiter whose signal
 * aborts leaves the queue without taking a slot.
 */
export class ConcurrencyLimiter {
  private active = 0;
  private readonly waiting: { grant: () => void; signal?: AbortSignal | undefined }[] = [];

  constructor(private readonly limit: number) {}

  get inFlight(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** A release function if a slot is free now (and nobody waits before us), else undefined. */
  tryAcquire(): (() => void) | undefined {
    if (this.active >= this.limit) return undefined;
    this.active++;
    return this.releaser();
  }

  /** Resolves with a release function once a slot is free; rejects with the signal's reason on abort. */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const entry = {
        signal,
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(this.releaser());
        },
      };
      const onAbort = () => {
        const index = this.waiting.indexOf(entry);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(entry);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter, so `active` stays the same.
      if (next) next.grant();
      else this.active--;
    };
  }
}
