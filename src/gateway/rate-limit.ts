import { AcpError } from "../protocol/index.js";

/**
 * Per-agent token bucket: `ratePerSecond` sustained, `burst` at once. In memory, per gateway
 * process: with N gateways an agent can reach N times the rate, which is the usual trade for not
 * putting a shared counter on the hot path.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {}

  take(agentId: string): void {
    if (this.ratePerSecond <= 0) return;
    const now = this.now();
    const bucket = this.buckets.get(agentId) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.ratePerSecond);
    bucket.at = now;
    if (bucket.tokens < 1) {
      this.buckets.set(agentId, bucket);
      const retryAfterSeconds = Math.max(1, Math.ceil((1 - bucket.tokens) / this.ratePerSecond));
      throw new AcpError("RateLimited", `rate limit of ${this.ratePerSecond} messages/s exceeded`, {
        retryAfterSeconds,
        limit: this.ratePerSecond,
      });
    }
    bucket.tokens -= 1;
    this.buckets.set(agentId, bucket);
  }
}
