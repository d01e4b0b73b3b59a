export type BreakerState = "closed" | "open" | "half-open";

export interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long the circuit stays open before one trial call is let through (half-open). */
  resetTimeoutMs: number;
  /** Told about every state change (metrics, logs). */
  onChange?: (from: BreakerState, to: BreakerState) => void;
}

/**
 * A circuit breaker for one target agent. Unlike the command layer's sample, which once open stays open
 * forever, it half-opens after `resetTimeoutMs`: exactly one trial call goes through; its success
 * closes the circuit, its failure opens it again for another reset timeout. While the trial is in
 * flight every other call is refused, so a recovering agent is not flooded.
 */
export class CircuitBreaker {
  private current: BreakerState = "closed";
  private failures = 0;
  private openedAt = 0;
  private trialInFlight = false;

  constructor(private readonly options: BreakerOptions) {}

  /** The state now (an open circuit whose reset timeout passed reports half-open). */
  get state(): BreakerState {
    if (this.current === "open" && Date.now() - this.openedAt >= this.options.resetTimeoutMs)
      return "half-open";
    return this.current;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  /** When an open circuit will let a trial through (ms since epoch), else undefined. */
  get retryAt(): number | undefined {
    return this.current === "open" ? this.openedAt + this.options.resetTimeoutMs : undefined;
  }

  /**
   * Asks to make a call. Returns a ticket to settle with the call's outcome, or undefined when the
   * circuit refuses the call.
   */
  acquire(): { succeed(): void; fail(): void; release(): void } | undefined {
    if (this.state === "half-open") {
      if (this.trialInFlight) return undefined;
      this.transition("half-open");
      this.trialInFlight = true;
      return this.ticket(true);
    }
    if (this.current === "open") return undefined;
    return this.ticket(false);
  }

  private ticket(trial: boolean) {
    let settled = false;
    const settle = (outcome: "success" | "failure" | "neutral") => {
      if (settled) return;
      settled = true;
      if (trial) this.trialInFlight = false;
      if (outcome === "success") {
        this.failures = 0;
        if (this.current !== "closed") this.transition("closed");
      } else if (outcome === "failure") {
        this.failures++;
        if (trial || (this.current === "closed" && this.failures >= this.options.failureThreshold)) {
          this.openedAt = Date.now();
          this.transition("open");
        }
      }
      // neutral (cancelled, caller's own mistake): says nothing about the agent's health.
    };
    return {
      succeed: () => settle("success"),
      fail: () => settle("failure"),
      release: () => settle("neutral"),
    };
  }

  private transition(to: BreakerState): void {
    const from = this.current;
    this.current = to;
    if (from !== to) this.options.onChange?.(from, to);
  }
}
