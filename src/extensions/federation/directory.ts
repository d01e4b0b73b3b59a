/**
 * The federation directory: this gateway's signed records of its own agents (what peers look up),
 * and the records of other domains' agents it looked up (cached a minute; used stale while their
 * gateway cannot be reached; fetched again for a key id they do not show, or when their gateway
 * tells of a change).
 */
import { createHash } from "node:crypto";
import type { AgentRecord, ResolvedAgent } from "../../gateway/registry.js";
import {
  AcpError,
  addressOf,
  domainOf,
  importPublicKey,
  keyId,
  localPartOf,
  qualifiedPrincipal,
  signingKeyAt,
} from "../../protocol/index.js";
import { DirectoryRecord } from "../../wire/federation.js";
import type { GatewaySigner } from "./gateway-key.js";
import { type PeerClient, PeerCallError } from "./peer-client.js";
import type { PeerGate } from "./peer-gate.js";

/** This gateway's record of one of its agents (revoked ones too: peers learn of it), signed. */
export function ownRecord(
  record: AgentRecord,
  domain: string,
  signer: GatewaySigner,
  now = new Date(),
): DirectoryRecord {
  const unsigned = {
    address: addressOf(record.agentId, domain),
    principalId: qualifiedPrincipal(record.principalId, domain),
    signing: {
      kty: "OKP" as const,
      crv: "Ed25519" as const,
      x: record.signing.x,
      kid: keyId(record.agentId, record.signing),
    },
    ...(record.encryption && {
      encryption: {
        kty: "OKP" as const,
        crv: "X25519" as const,
        x: record.encryption.x,
        kid: keyId(record.agentId, record.encryption),
      },
    }),
    protocolVersions: record.protocolVersions,
    keyHistory: record.keyHistory ?? [],
    ...(record.revokedAt && { revokedAt: record.revokedAt }),
    issuedAt: now.toISOString(),
  };
  return signer.sign(unsigned);
}

/** An agent of another domain as the relay takes it: its record, and the key that signed a message. */
export function remoteAgentOf(
  record: DirectoryRecord,
  kid?: string,
  timestamp?: string,
): ResolvedAgent | undefined {
  const agentId = localPartOf(record.address);
  const signedBy = kid ?? keyId(agentId, record.signing);
  // An earlier key verifies a message signed before the rotation, still on its way.
  const jwk = signingKeyAt(agentId, record.signing, record.keyHistory, signedBy, timestamp);
  const key = jwk && importPublicKey(jwk);
  if (!key) return undefined;
  return {
    record: {
      agentId: record.address,
      principalId: record.principalId,
      signing: record.signing,
      ...(record.encryption && { encryption: record.encryption }),
      capabilities: [],
      protocolVersions: record.protocolVersions,
      apiKeyHash: "",
      createdAt: record.issuedAt,
      ...(record.revokedAt && { revokedAt: record.revokedAt }),
    },
    kid: signedBy,
    key,
  };
}

interface Cached {
  record: DirectoryRecord | null;
  at: number;
  /** Its gateway told of a change since it was fetched. */
  changed?: true;
}

/** A record's gateway could not be reached to fetch it (the record held may stand in). */
class Unreachable extends AcpError {}

/** Records of other domains' agents kept at once; the least recently fetched go first. */
const MAX_CACHED = 10_000;

export class RemoteDirectory {
  private readonly cache = new Map<string, Cached>();
  private readonly inflight = new Map<string, Promise<DirectoryRecord | null>>();

  constructor(
    private readonly gate: PeerGate,
    private readonly client: PeerClient,
    private readonly ttlMs: number,
  ) {}

  /**
   * The record of `address` (an agent of another domain), or null when its gateway says there is no
   * such agent. `fresh`: fetch it again even if cached (an unknown key id, a notice). While its
   * gateway cannot be reached, the record held stands in, except, with `toVerify` (checking a
   * message that agent sent), one its gateway said had changed: that may be a revocation.
   */
  async lookup(
    address: string,
    { fresh = false, toVerify = false }: { fresh?: boolean; toVerify?: boolean } = {},
  ): Promise<DirectoryRecord | null> {
    const cached = this.cache.get(address);
    if (cached && !fresh && Date.now() - cached.at <= this.ttlMs) return cached.record;
    let running = this.inflight.get(address);
    if (!running) {
      running = this.fetch(address).finally(() => this.inflight.delete(address));
      this.inflight.set(address, running);
    }
    try {
      return await running;
    } catch (err) {
      if (err instanceof Unreachable && cached && !(toVerify && cached.changed)) return cached.record;
      throw err;
    }
  }

  /** The records held now (agents of other domains, looked up lately), the most recently fetched last. */
  cached(): DirectoryRecord[] {
    return [...this.cache.values()].flatMap((entry) => (entry.record ? [entry.record] : []));
  }

  /**
   * Marks a record out of date (its gateway told of a change): the next lookup fetches it. The old
   * record stays as the stand-in while that gateway cannot be reached, as an expired one does (a
   * notice that comes just before its gateway goes down must not leave the agent unknown here), but
   * not for checking that agent's messages (`lookup`).
   */
  invalidate(address: string): void {
    const cached = this.cache.get(address);
    if (cached) Object.assign(cached, { at: Number.NEGATIVE_INFINITY, changed: true });
  }

  private async fetch(address: string): Promise<DirectoryRecord | null> {
    const domain = domainOf(address) as string;
    const peer = await this.gate.admitted(domain);
    let record: DirectoryRecord | null;
    try {
      record = await this.client.call(
        peer.endpoint as string,
        domain,
        "GET",
        `/agents/${encodeURIComponent(localPartOf(address))}`,
        undefined,
        DirectoryRecord,
      );
    } catch (err) {
      if (err instanceof PeerCallError && err.status === 404) record = null;
      else {
        throw new Unreachable(
          "StorageUnavailable",
          `cannot look up ${address} at ${domain}: ${(err as Error).message}`,
          { peer: domain },
        );
      }
    }
    if (record) {
      try {
        await this.gate.verifyRecord(peer, record);
      } catch (err) {
        throw new AcpError(
          "SignatureInvalid",
          `${domain}'s record of ${address} does not verify: ${(err as Error).message}`,
        );
      }
      if (record.address !== address) {
        throw new AcpError(
          "SignatureInvalid",
          `${domain} answered the record of ${record.address} for ${address}`,
        );
      }
    }
    this.cache.delete(address);
    if (this.cache.size >= MAX_CACHED) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(address, { record, at: Date.now() });
    return record;
  }
}

/** Where a message to an agent of `domain` waits at this gateway: `_fed_<domain, dots as _>`. */
export function peerInbox(domain: string): string {
  return `_fed_${domain.replaceAll(".", "_")}`;
}

/** The domain of a peer's inbox name, or undefined for any other inbox. */
export function domainOfInbox(inbox: string): string | undefined {
  return inbox.startsWith("_fed_") ? inbox.slice(5).replaceAll("_", ".") : undefined;
}

/**
 * The broker's name for an agent of another domain whose messages are stored here: `_at_` and 40
 * hex digits of the SHA-256 of its address. Each remote sender has its own message-id namespace, as
 * a local one has (no agent of a peer can squat another's ids), in a name every broker takes.
 */
export function remoteSenderInbox(address: string): string {
  return `_at_${createHash("sha256").update(address).digest("hex").slice(0, 40)}`;
}
