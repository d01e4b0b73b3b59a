import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { AcpError } from "../protocol/index.js";
import { credentialOf, hashSecret } from "./auth.js";
import type { Metrics } from "./metrics.js";
import type { PrincipalStore } from "./principals.js";
import type { FailedCredentialLimiter } from "./rate-limit.js";
import type { Registry, ResolvedAgent } from "./registry.js";

/** Who sent a request: an agent (API key), a human principal (principal token) or the admin. */
export type Caller =
  | { kind: "agent"; agent: ResolvedAgent }
  | { kind: "principal"; principalId: string }
  | { kind: "admin" };

export type CallerKind = Caller["kind"];

/** What a refusal says, by the credentials an endpoint accepts (the key lists them in a fixed order). */
const REFUSALS: Record<string, { missing: string; unknown: string }> = {
  "agent,admin": {
    missing: "send an API key (X-API-Key, Api-Key or Authorization: Bearer)",
    unknown: "unknown or revoked API key",
  },
  "principal,admin": {
    missing: "sign in with a principal token or the admin token (Authorization: Bearer)",
    unknown: "unknown or revoked principal token",
  },
  "agent,principal,admin": {
    missing: "send an API key, a principal token or the admin token",
    unknown: "unknown or revoked credential",
  },
};
const ORDER: CallerKind[] = ["agent", "principal", "admin"];

/**
 * The gateway's one credential resolver: the admin token (compared by hash, in constant time), an
 * agent's API key, or a principal token. Every endpoint, core or extension, authenticates here,
 * and so does the WebSocket; a source address that presented too many wrong credentials is
 * refused before its next one is looked at (FailedCredentialLimiter).
 */
export class Credentials {
  constructor(
    /** SHA-256 of the admin token; the token itself is not kept. */
    private readonly adminTokenHash: string,
    private readonly registry: Registry,
    private readonly principals: PrincipalStore,
    private readonly failures: FailedCredentialLimiter,
    private readonly metrics: Metrics,
  ) {}

  /** The request's caller among the kinds accepted; anything else is 401 (Unauthorized). */
  async resolve<K extends CallerKind>(
    req: IncomingMessage,
    accepted: readonly K[],
  ): Promise<Extract<Caller, { kind: K }>> {
    const refusal = refusalFor(accepted);
    const credential = credentialOf(req.headers);
    if (!credential) throw new AcpError("Unauthorized", refusal.missing);
    const caller = await this.checked(req, () => this.callerOf(credential, accepted));
    if (!caller) throw new AcpError("Unauthorized", refusal.unknown);
    return caller as Extract<Caller, { kind: K }>;
  }

  /** The agent an API key acts as (a WebSocket's, from its header or first frame), counted like `resolve`. */
  agentOf(req: IncomingMessage, apiKey: string): Promise<ResolvedAgent | undefined> {
    return this.checked(req, () => this.registry.authenticate(apiKey));
  }

  /** Runs a credential check unless `req`'s source is throttled; a miss counts against the source. */
  private async checked<T>(
    req: IncomingMessage,
    check: () => Promise<T | undefined>,
  ): Promise<T | undefined> {
    const source = req.socket.remoteAddress;
    try {
      this.failures.check(source);
    } catch (err) {
      this.metrics.count("acp_credentials_throttled_total");
      throw err;
    }
    const found = await check();
    if (found === undefined) {
      this.failures.failed(source);
      this.metrics.count("acp_credentials_failed_total");
    }
    return found;
  }

  private async callerOf(credential: string, accepted: readonly CallerKind[]): Promise<Caller | undefined> {
    const hash = hashSecret(credential);
    if (accepted.includes("admin") && this.isAdmin(hash)) return { kind: "admin" };
    if (accepted.includes("agent")) {
      const agent = await this.registry.authenticateHash(hash);
      if (agent) return { kind: "agent", agent };
    }
    if (accepted.includes("principal")) {
      const principalId = await this.principals.authenticate(credential);
      if (principalId !== undefined) return { kind: "principal", principalId };
    }
    return undefined;
  }

  private isAdmin(hash: string): boolean {
    return timingSafeEqual(Buffer.from(hash, "hex"), Buffer.from(this.adminTokenHash, "hex"));
  }
}

function refusalFor(accepted: readonly CallerKind[]): { missing: string; unknown: string } {
  const key = ORDER.filter((kind) => accepted.includes(kind)).join(",");
  const known = REFUSALS[key];
  if (known) return known;
  return { missing: `send a credential (${key})`, unknown: `unknown or revoked credential (${key})` };
}
