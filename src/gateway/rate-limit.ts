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

export interface FailedCredentialLimits {
  /** Wrong credentials one source may present at once (default 20). */
  burst?: number;
  /** …and then per minute (default 20: one every 3 s). */
  perMinute?: number;
  /** Sources remembered at once (default 10,000); past it the one that failed longest ago is forgotten. */
  maxSources?: number;
}

/**
 * Failed credential checks (an unknown API key, principal token or admin token) per source
 * address, as a mail server throttles failed logins. Each failure takes a token from the source's
 * bucket; a source with none left is refused (-32013, Retry-After) before any credential it sends
 * is looked at, right or wrong, so guessing costs time whatever the endpoint. IPv6 sources count
 * per /64, which one host usually holds whole. The table is bounded (a stranger chooses its keys).
 * Behind a reverse proxy every client is the proxy's address: throttle at the proxy there.
 */
export class FailedCredentialLimiter {
  private readonly sources = new Map<string, { tokens: number; at: number }>();
  private readonly burst: number;
  private readonly perMs: number;
  private readonly maxSources: number;

  constructor(
    limits: FailedCredentialLimits = {},
    private readonly now: () => number = Date.now,
  ) {
    this.burst = limits.burst ?? 20;
    this.perMs = (limits.perMinute ?? 20) / 60_000;
    this.maxSources = limits.maxSources ?? 10_000;
  }

  get size(): number {
    return this.sources.size;
  }

  /** Throws RateLimited while `address` has no failed attempt left. */
  check(address: string | undefined): void {
    const tokens = this.tokensOf(sourceKey(address));
    if (tokens >= 1) return;
    const retryAfterSeconds = Math.max(1, Math.ceil((1 - tokens) / this.perMs / 1000));
    throw new AcpError(
      "RateLimited",
      `too many failed credential checks from this address; retry in ${retryAfterSeconds} s`,
      { retryAfterSeconds },
    );
  }

  /** A credential presented from `address` was wrong. */
  failed(address: string | undefined): void {
    const key = sourceKey(address);
    const tokens = this.tokensOf(key) - 1;
    this.sources.delete(key);
    this.sources.set(key, { tokens, at: this.now() });
    if (this.sources.size > this.maxSources) this.sources.delete(this.sources.keys().next().value as string);
  }

  private tokensOf(key: string): number {
    const entry = this.sources.get(key);
    if (!entry) return this.burst;
    const tokens = Math.min(this.burst, entry.tokens + (this.now() - entry.at) * this.perMs);
    // Refilled: nothing left to remember.
    if (tokens >= this.burst) this.sources.delete(key);
    return tokens;
  }
}

/** The address a limit applies to: IPv4 as is (also IPv4-mapped IPv6), IPv6 by its /64. */
export function sourceKey(address: string | undefined): string {
  if (address === undefined) return "unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1] as string;
  if (!address.includes(":")) return address;
  const [head = "", tail = ""] = address.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = address.includes("::")
    ? [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
