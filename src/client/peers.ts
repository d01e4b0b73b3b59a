import type { KeyObject } from "node:crypto";
import {
  AcpError,
  importPublicKey,
  localPartOf,
  type PrivateIdentity,
  signingKeyAt,
  TRUST_LAYER_VERSION,
  type X25519PublicJwk,
} from "../protocol/index.js";
import type { AgentView } from "../wire/agents.js";
import { negotiateVersion } from "../wire/versions.js";
import type { AgentDirectory } from "./types.js";

interface PeerKeys {
  view: AgentView;
  /** Imported keys by key id (its current one, and earlier ones once a message needed them). */
  imported: Map<string, KeyObject>;
}

/**
 * Public keys of other agents, fetched from the gateway's registry (GET /api/v1/agents/:id; for an
 * agent of another domain, its home directory's record) and cached. A signature by a key id the
 * cache does not know triggers one refetch (the peer may have rotated or re-registered its key). An
 * earlier key of the agent's key history verifies what it signed while it was current; a revoked
 * agent has no usable keys.
 */
export class PeerDirectory {
  private readonly peers = new Map<string, PeerKeys>();
  private readonly inflight = new Map<string, Promise<PeerKeys | undefined>>();
  private selfVersions: string[] = [TRUST_LAYER_VERSION];
  /** This agent's federation address, when its gateway federates (docs/federation.md). */
  selfAddress: string | undefined;

  constructor(private readonly http: AgentDirectory) {}

  /**
   * Reads this agent's own registry entry: its protocol versions, and a check that the key file is
   * the one registered (else every message would be refused as badly signed).
   */
  async loadSelf(identity: PrivateIdentity): Promise<void> {
    const view = await this.http.getAgent(identity.agentId);
    if (view.revoked_at !== undefined) {
      throw new AcpError("Unauthorized", `${identity.agentId} was revoked at ${view.revoked_at}`);
    }
    if (view.signing.x !== identity.signing.x) {
      throw new AcpError(
        "UnknownKey",
        `the key file's signing key is not the one registered for ${identity.agentId} at the gateway`,
      );
    }
    this.selfVersions = view.protocol_versions;
    this.selfAddress = view.address;
  }

  /** The protocol version the gateway negotiated for this pair: the highest both registered. */
  async protocolVersion(agentId: string): Promise<string> {
    const peer = this.peers.get(agentId) ?? (await this.fetch(agentId));
    if (!peer) throw new AcpError("UnknownRecipient", `${agentId} is not registered at the gateway`);
    const version = negotiateVersion(this.selfVersions, peer.view.protocol_versions);
    if (!version) {
      throw new AcpError("NoCommonVersion", `this agent and ${agentId} share no protocol version`, {
        mine: this.selfVersions,
        theirs: peer.view.protocol_versions,
      });
    }
    return version;
  }

  /**
   * Synchronous lookup for verifyEnvelope's KeyResolver, from what is cached: the agent's current key,
   * or an earlier one for a message signed (`signedAt`) while it was current.
   */
  resolve(agentId: string, kid: string, signedAt?: string): KeyObject | undefined {
    const peer = this.peers.get(agentId);
    if (!peer) return undefined;
    // An agent of another domain (`alpha@a.example`) signs with the key id of its own id.
    const jwk = signingKeyAt(localPartOf(agentId), peer.view.signing, peer.view.key_history, kid, signedAt);
    if (!jwk) return undefined;
    let key = peer.imported.get(jwk.x);
    if (!key) {
      key = importPublicKey(jwk);
      peer.imported.set(jwk.x, key);
    }
    return key;
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
      throw new AcpError(
        "CapabilityMissing",
        `${agentId} registered no encryption key; cannot encrypt to it`,
      );
    }
    return key;
  }

  async principalOf(agentId: string): Promise<string | undefined> {
    return (this.peers.get(agentId) ?? (await this.fetch(agentId)))?.view.principal_id;
  }

  /** The principal of a peer whose registry entry is cached (for audit entries). */
  cachedPrincipal(agentId: string): string | undefined {
    return this.peers.get(agentId)?.view.principal_id;
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
      if (err instanceof AcpError && (err.kind === "NotFound" || err.kind === "UnknownRecipient")) {
        this.peers.delete(agentId);
        return undefined;
      }
      throw err;
    }
    if (view.revoked_at !== undefined) {
      this.peers.delete(agentId);
      return undefined;
    }
    const peer: PeerKeys = { view, imported: new Map([[view.signing.x, importPublicKey(view.signing)]]) };
    this.peers.set(agentId, peer);
    return peer;
  }
}
