import { Handshakes, type PeerHandshake } from "../handshake/index.js";
import type { TrustLedger } from "../identity/index.js";
import {
  AcpError,
  type AcpMessage,
  agentOfKeyId,
  createSigner,
  domainOf,
  type EncryptedBody,
  encryptBody,
  headersOf,
  MAX_SUMMARY_HEADER_CHARS,
  type PrivateIdentity,
  qualifiedPrincipal,
  ReplayGuard,
  type SenderIdentity,
  type Signer,
  signMessage,
  type VerifiedEnvelope,
  verifyEnvelope,
} from "../protocol/index.js";
import { headerPointer } from "../protocol/validate.js";
import type { AgentCoreDeps, AgentCoreSettings, Emit, Handlers } from "./agent-core-deps.js";
import type { AgentAudit, AuditNote } from "./audit.js";
import type { AgentConnection } from "./connection.js";
import type { HandshakeStore, PeerProof } from "./handshake-store.js";
import { HandshakeWaits } from "./handshake-waits.js";
import type { GatewayHealth } from "./health.js";
import type { DeliveryLedger } from "./ledger.js";
import { PeerDirectory } from "./peers.js";
import { PendingRequests } from "./pending.js";
import type { AgentDirectory } from "./types.js";

/**
 * The state of a connected agent, shared by the public AcpAgent (outbound) and the Inbound
 * pipeline: identity and signer, the gateway link, peers' keys, the handshake machine, trust,
 * replay and dedup state, pending requests, and the audit log. Sending always goes through `send`
 * so that every message is signed, submitted and audited the same way.
 */
export class AgentCore {
  readonly self: SenderIdentity;
  readonly signer: Signer;
  readonly handshakes: Handshakes;
  readonly replay: ReplayGuard;
  readonly pending: PendingRequests;
  readonly peers: PeerDirectory;
  /** The latest verified announce and capabilities of each peer: saved once the handshake completes. */
  private readonly proofs = new Map<string, Partial<PeerProof>>();
  private restoring = false;
  private readonly handshaking = new Map<string, Promise<PeerHandshake>>();
  private readonly waits: HandshakeWaits;

  readonly identity: PrivateIdentity;
  readonly settings: AgentCoreSettings;
  readonly http: AgentDirectory;
  readonly connection: AgentConnection;
  readonly trust: TrustLedger;
  readonly audit: AgentAudit | undefined;
  private readonly store: HandshakeStore | undefined;
  readonly ledger: DeliveryLedger;
  readonly handlers: Handlers;
  readonly emit: Emit;
  /** Where failures at the gateway that the SDK works around go, instead of `error`. */
  readonly health: GatewayHealth;

  constructor(deps: AgentCoreDeps) {
    const { identity, settings, http } = deps;
    this.identity = identity;
    this.settings = settings;
    this.http = http;
    this.connection = deps.connection;
    this.trust = deps.trust;
    this.audit = deps.audit;
    this.store = deps.handshakeStore;
    this.ledger = deps.ledger;
    this.handlers = deps.handlers;
    this.emit = deps.emit;
    this.health = deps.health;
    this.self = { agentId: identity.agentId, principalId: identity.principalId, layers: settings.layers };
    this.signer = createSigner(identity);
    this.peers = new PeerDirectory(http);
    this.replay = new ReplayGuard({ skewMs: settings.replayWindowMs });
    this.pending = new PendingRequests((peer) => this.trust.observe(peer, "timeout"));
    this.handshakes = new Handshakes(
      {
        self: this.self,
        announce: settings.announce,
        capabilities: settings.capabilities,
        trust: this.trust,
        undeclaredLayers: settings.undeclaredLayers,
      },
      (event) => {
        if (!this.restoring) this.emit("handshake", event);
      },
    );
    this.waits = new HandshakeWaits(this.handshakes, this.trust);
  }

  /**
   * Verifies a delivered envelope end to end: signature against the sender's registered key
   * (fetched once more if the key id is unknown), recipient = this agent. Freshness is the caller's.
   */
  async verify(envelope: unknown): Promise<VerifiedEnvelope> {
    const options = {
      resolveKey: (agentId: string, kid: string, signedAt?: string) =>
        this.peers.resolve(agentId, kid, signedAt),
    };
    let verified: VerifiedEnvelope;
    try {
      verified = verifyEnvelope(envelope, options);
    } catch (err) {
      if (!(err instanceof AcpError && err.kind === "UnknownKey" && typeof err.data.kid === "string"))
        throw err;
      // The sender's key id names its local id; the directory is asked by the name it signed as.
      const headers =
        typeof envelope === "object" && envelope !== null ? headersOf(envelope as AcpMessage) : undefined;
      await this.peers.ensureKey(headers?.["agent-id"] ?? agentOfKeyId(err.data.kid), err.data.kid);
      verified = verifyEnvelope(envelope, options);
    }
    this.requireAddressedToSelf(verified);
    return verified;
  }

  /** This agent's federation address (`agent-id@domain`) when its gateway federates. */
  get address(): string | undefined {
    return this.peers.selfAddress;
  }

  /** Whether a `recipient-id` names this agent: its id, or its address. */
  isSelf(ref: string): boolean {
    return ref === this.self.agentId || (this.address !== undefined && ref === this.address);
  }

  /**
   * What this agent calls itself in a message to `peer`: its id and principal, or, to an agent
   * named by an address (of another domain), its own address and its principal qualified with its
   * domain (docs/federation.md).
   */
  namesFor(peer: string): { agentId: string; principalId: string } {
    const address = this.address;
    if (domainOf(peer) === undefined || address === undefined) {
      return { agentId: this.self.agentId, principalId: this.self.principalId };
    }
    return {
      agentId: address,
      principalId: qualifiedPrincipal(this.self.principalId, domainOf(address) as string),
    };
  }

  private requireAddressedToSelf({ message, headers }: VerifiedEnvelope): void {
    const to = headers["recipient-id"];
    if (this.isSelf(to)) return;
    throw new AcpError("Misrouted", `addressed to ${to}, not ${this.self.agentId}`, {
      problems: [
        { path: `${headerPointer(message)}/recipient-id`, message: `expected ${this.self.agentId}` },
      ],
    });
  }

  /**
   * A sender's `principal-id` header is its own claim; the principal it acts for is the one the
   * gateway registered it for (the registry entry, cached with its key). The gateway refuses a
   * message claiming another; this refuses it too, should the message come some other way, so
   * trust (a known principal's 0.95) is never calibrated on a claim alone.
   */
  async requireRegisteredPrincipal({ message, headers }: VerifiedEnvelope): Promise<void> {
    const sender = headers["agent-id"];
    const registered = await this.peers.principalOf(sender);
    if (registered !== headers["principal-id"]) {
      throw new AcpError(
        "Forbidden",
        registered === undefined
          ? `${sender} is not a registered agent; its principal cannot be vouched for`
          : `${sender} is registered for principal ${registered}, not ${headers["principal-id"]}`,
        {
          problems: [
            {
              path: headerPointer(message, "principal-id"),
              message: registered === undefined ? "no registered principal" : `must be ${registered}`,
            },
          ],
        },
      );
    }
  }

  /** Records a verified handshake message from `peer`; once established, its proof is saved. */
  async rememberHandshake(peer: string, message: AcpMessage): Promise<void> {
    const method = "method" in message ? message.method : "";
    if (method === "agent.announce") this.proofs.set(peer, { announce: message });
    else if (method === "agent.capabilities")
      this.proofs.set(peer, { ...this.proofs.get(peer), capabilities: message });
    const proof = this.proofs.get(peer);
    if (this.store && proof?.announce && proof.capabilities && this.handshakes.isEstablished(peer)) {
      await this.store.save(peer, { announce: proof.announce, capabilities: proof.capabilities });
    }
  }

  /** Re-establishes the handshakes saved by an earlier run, each proof verified again. */
  async restoreHandshakes(): Promise<void> {
    if (!this.store) return;
    const saved = await this.store.load();
    await Promise.all(
      Object.entries(saved).map(async ([peer, proof]) => {
        if (!(await this.replayProof(peer, proof))) await this.store?.forget(peer);
      }),
    );
  }

  /**
   * This agent lost its record of a handshake `peer` completed with it: the gateway keeps the
   * peer's side as relayed (its signed announce and capabilities), verified here like a saved
   * proof. True when the handshake is established again (and saved); false when the gateway has no
   * such proof (or it does not verify): then only a fresh handshake will do. Throws what the
   * gateway answered if it could not be asked (the caller decides whether to ask again).
   */
  async recoverHandshake(peer: string): Promise<boolean> {
    const proof = await this.http.handshakeProof?.(peer);
    if (!proof || !(await this.replayProof(peer, proof))) return false;
    await this.store?.save(peer, this.proofs.get(peer) as PeerProof);
    this.handshakeProgressed(peer);
    return true;
  }

  /** Verifies a peer's signed announce and capabilities and replays them into the handshake machine. */
  private async replayProof(
    peer: string,
    proof: { announce: unknown; capabilities: unknown },
  ): Promise<boolean> {
    try {
      const announce = await this.verify(proof.announce);
      const capabilities = await this.verify(proof.capabilities);
      if (announce.headers["agent-id"] !== peer || capabilities.headers["agent-id"] !== peer) {
        throw new AcpError("InvalidParams", "the proof names another agent");
      }
      await this.requireRegisteredPrincipal(announce);
      this.handshakes.reset(peer);
      this.restoring = true;
      try {
        this.handshakes.receive(announce);
        this.handshakes.receive(capabilities);
      } finally {
        this.restoring = false;
      }
      if (!this.handshakes.isEstablished(peer)) throw new AcpError("HandshakeRequired");
      this.proofs.set(peer, { announce: announce.message, capabilities: capabilities.message });
      return true;
    } catch {
      this.handshakes.reset(peer);
      return false;
    }
  }

  /**
   * Signs, submits (over the WebSocket) and audits one message; resolves once the gateway accepted
   * it. An unknown outcome is resent as the identical signed envelope until `deadline` (the caller's
   * timeout) or the agent's `submitRetry.maxAttempts`: see outbox.ts.
   */
  async send<M extends object>(
    message: M,
    peer: string,
    note: Omit<AuditNote, "direction" | "peer"> = {},
    limits: { deadline?: number; signal?: AbortSignal } = {},
  ): Promise<{ signed: M & { signature: string }; id: string; duplicate: boolean }> {
    return this.submitSigned(await this.sign(message, peer, note.summary), peer, note, limits);
  }

  /** Stamps the protocol version negotiated with `peer` (and the summary header, if any) and signs. */
  async sign<M extends object>(
    message: M,
    peer: string,
    summaryText?: string,
  ): Promise<M & { signature: string }> {
    const headers = headersOf(message as unknown as AcpMessage);
    if (headers) {
      headers["trust-layer-version"] = await this.peers.protocolVersion(peer);
      const names = this.namesFor(peer);
      headers["agent-id"] = names.agentId;
      headers["principal-id"] = names.principalId;
    }
    const summary = summaryHeaderOf(message, summaryText);
    if (headers && summary !== undefined) headers.summary = summary;
    return signMessage(message, this.signer);
  }

  /** The second half of `send`: submits an envelope signed already (sent again as it is), then audits it. */
  async submitSigned<M extends object>(
    signed: M,
    peer: string,
    note: Omit<AuditNote, "direction" | "peer"> = {},
    limits: { deadline?: number; signal?: AbortSignal } = {},
  ): Promise<{ signed: M; id: string; duplicate: boolean }> {
    const headers = headersOf(signed as unknown as AcpMessage);
    const submitted = await this.connection.submit(signed as unknown as Record<string, unknown>, {
      messageId: headers?.["message-id"] ?? "",
      ...limits,
    });
    await this.record(signed, "sent", peer, note);
    return { signed, id: submitted.id, duplicate: submitted.duplicate };
  }

  record(
    message: unknown,
    direction: "sent" | "received",
    peer: string,
    note: Omit<AuditNote, "direction" | "peer"> = {},
  ): Promise<void> {
    if (!this.audit) return Promise.resolve();
    return this.audit.record(message, {
      ...note,
      direction,
      peer: { agent: peer, principal: this.principalOf(peer) },
    });
  }

  principalOf(peer: string): string | undefined {
    // The registry entry is cached by the first exchange; the handshake record is the fallback.
    return (
      this.peers.cachedPrincipal(peer) ??
      (this.handshakes.isEstablished(peer) ? this.handshakes.get(peer).principalId : undefined)
    );
  }

  async encryptFor(peer: string, body: Record<string, unknown>): Promise<EncryptedBody> {
    const recipientKey = await this.peers.encryptionKey(peer);
    return encryptBody(body, { senderId: this.namesFor(peer).agentId, recipientId: peer, recipientKey });
  }

  /** Runs the four-step handshake with `peer` (or joins the one under way); resolves when established. */
  handshake(peer: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<PeerHandshake> {
    if (this.isSelf(peer)) {
      return Promise.reject(new AcpError("InvalidParams", "an agent does not handshake with itself"));
    }
    if (this.handshakes.isEstablished(peer)) return Promise.resolve(this.handshakes.get(peer));
    let running = this.handshaking.get(peer);
    if (!running) {
      running = this.runHandshake(peer, options).finally(() => this.handshaking.delete(peer));
      this.handshaking.set(peer, running);
    }
    return running;
  }

  /** Called by the inbound pipeline after every handshake message: wakes whoever waits for `peer`. */
  handshakeProgressed(peer: string): void {
    this.waits.progressed(peer);
  }

  private async runHandshake(
    peer: string,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<PeerHandshake> {
    const established = this.waits.established(peer, options);
    // It may fail (cancelled, timed out) while the announce is still being sent, before the caller
    // awaits it: that is not an unhandled rejection, the caller still gets it below.
    established.catch(() => undefined);
    // A handshake already under way (the peer announced first) only needs waiting for.
    if (this.handshakes.get(peer).state === "none") {
      try {
        for (const message of this.handshakes.start(peer)) await this.send(message, peer);
      } catch (err) {
        this.handshakes.reset(peer);
        throw err;
      }
    }
    return established;
  }
}

/**
 * The caller's summary, signed into the `summary` header so the gateway's transparency channel
 * shows the agent's own words. Never on an end-to-end encrypted message: its summary stays local
 * (where it is not shown either), so nothing of the payload travels in clear.
 */
function summaryHeaderOf(message: object, given: string | undefined): string | undefined {
  const text = given?.replace(/\s+/g, " ").trim();
  if (!text) return undefined;
  const carrier =
    (message as { params?: { body?: unknown }; result?: { body?: unknown } }).params ??
    (message as { result?: { body?: unknown } }).result;
  const body = carrier?.body;
  if (typeof body === "object" && body !== null && "jwe" in body) return undefined;
  if (text.length > MAX_SUMMARY_HEADER_CHARS) {
    throw new AcpError("InvalidParams", `a summary is at most ${MAX_SUMMARY_HEADER_CHARS} characters`, {
      problems: [
        {
          path: "/params/headers/summary",
          message: `must be at most ${MAX_SUMMARY_HEADER_CHARS} characters`,
        },
      ],
    });
  }
  return text;
}
