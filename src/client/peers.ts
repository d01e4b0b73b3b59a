import type { KeyObject } from "node:crypto";
import type { AgentView } from "../gateway/wire.js";
import { AcpError, importPublicKey, keyId, type X25519PublicJwk } from "../protocol/index.js";
import type { GatewayClient } from "./http.js";

interface PeerKeys {
  view: AgentView;
  /** The registered kid and the RFC 7638 one: a signer may use either. */
  signingKids: Set<string>;
  signingKey: KeyObject;
}

/**
 * Public keys of other agents, fetched from the gateway's registry (GET /api/v1/agents/:id) and
 * cached. A signature by a key id the cache does not know triggers one refetch (the peer may have
 * re-registered a new key); a revoked agent has no usable keys.
 */
export class PeerDirectory {
  private readonly peers = new Map<string, PeerKeys>();
  private readonly inflight = new Map<string, Promise<PeerKeys | undefined>>();

  constructor(private readonly http: GatewayClient) {}

  /** Synchronous lookup for verifyEnvelope's KeyResolver: only what is cached. */
  resolve(agentId: string, kid: string): KeyObject | undefined {
    const peer = this.peers.get(agentId);
    return peer?.signingKids.has(kid) ? peer.signingKey : undefined;
  }

  /** Makes sure the key `kid` of `agentId` is cached if the registry has it; fetches at most once. */
  async ensureKey(agentId: string, kid: string): Promise<void> {
    if (this.resolve(agentId, kid)) return;
    await this.fetch(agentId);
  }

  /** The X25519 key to encrypt a body to `agentId`. */
  async encryptionKey(agentId: string): Promise<X25519PublicJwk> {
    const peer = this.peers.get(agentId) ?? (await this.fetch(agentId));
    if (!peer) throw new AcpError("UnknownRecipient", `${agentId} is not registered at the gateway`);
    const key = peer.view.encryption;
    if (!key) {
      throw new AcpError("CapabilityMissing", `${agentId} registered no encryption key; cannot encrypt to it`);
    }
    return key;
  }

  async principalOf(agentId: string): Promise<string | undefined> {
    return (this.peers.get(agentId) ?? (await this.fetch(agentId)))?.view.principalId;
  }

  /** The principal of a peer whose registry entry is cached (for audit entries). */
  cachedPrincipal(agentId: string): string | undefined {
    return this.peers.get(agentId)?.view.principalId;
  }

  forget(agentId: string): void {
    this.peers.delete(agentId);
  }

  private fetch(agentId: string): Promise<PeerKeys | undefined> {
    const running = this.inflight.get(agentId);
    if (running) return running;
    const fetched = this.load(agentId).finally(() => this.inflight.delete(agentId));
    this.inflight.set(agentId, fetched);
    return fetched;
  }

  private async load(agentId: string): Promise<PeerKeys | undefined> {
    let view: AgentView;
    try {
      view = await this.http.getAgent(agentId);
    } catch (err) {
      if (err instanceof AcpError && (err.reason === "NotFound" || err.reason === "UnknownRecipient")) {
        this.peers.delete(agentId);
        return undefined;
      }
      throw err;
    }
    if (view.revokedAt !== undefined) {
      this.peers.delete(agentId);
      return undefined;
    }
    const peer: PeerKeys = {
      view,
      signingKids: new Set([keyId(agentId, view.signing), ...(view.signing.kid ? [view.signing.kid] : [])]),
      signingKey: importPublicKey(view.signing),
    };
    this.peers.set(agentId, peer);
    return peer;
  }
}
