import {
  AcpError,
  buildHandoff,
  buildNotification,
  createSigner,
  domainOf,
  type MethodMessage,
  type PrivateIdentity,
  qualifiedPrincipal,
  type SenderIdentity,
  type Signer,
  signMessage,
} from "../protocol/index.js";
import type { AgentView } from "../wire/agents.js";
import { camelCased } from "../wire/deprecated-names.js";
import { API_PREFIX } from "../wire/api.js";
import { negotiateVersion } from "../wire/versions.js";
import type { AcpAgent } from "./agent.js";
import { GatewayClient, normaliseGatewayUrl } from "./http.js";
import { requestGatewayJson } from "./request.js";

export interface CollabClientOptions {
  /** The agent's private identity: collaboration messages are signed with its key. */
  identity: PrivateIdentity;
  /** The API key the gateway issued to this agent. */
  apiKey: string;
  /** The gateway's base URL; default: the `agent`'s. */
  gateway?: string;
  /**
   * The same agent, connected: it runs the handshake with each peer before a message is relayed to
   * it, and receives what peers send (offers, counters, channel posts…). Without it only reads and
   * records addressed to the agent itself (ballots, entries, status) work.
   */
  agent?: AcpAgent;
  /** skill-layers-loaded on every message: must be what the agent declared in its handshake. Default [0, 1]. */
  layers?: number[];
  /** How long a handshake may take. Default 30 s. */
  timeoutMs?: number;
}

/** A signed message ready to POST, with the identifiers it was signed with. */
export interface Signed {
  message: MethodMessage & { signature: string };
  messageId: string;
  timestamp: string;
}

/**
 * What every collaboration call needs: the signer, the gateway's REST API, peers' registry entries
 * (keys, principals, protocol versions), and handshakes through the connected agent.
 */
export class CollabCore {
  readonly self: SenderIdentity;
  readonly signer: Signer;
  readonly baseUrl: string;
  readonly agent: AcpAgent | undefined;
  readonly apiKey: string;
  private readonly registry: GatewayClient;
  private readonly views = new Map<string, Promise<AgentView>>();
  private readonly timeoutMs: number;

  constructor(options: CollabClientOptions) {
    const gateway = options.gateway ?? options.agent?.gateway;
    if (gateway === undefined) {
      throw new AcpError("InvalidParams", "CollabClient needs `gateway` or a connected `agent`", {
        problems: [{ path: "/gateway", message: "is required without agent" }],
      });
    }
    if (options.agent?.agentId !== undefined && options.agent.agentId !== options.identity.agentId) {
      throw new AcpError(
        "InvalidParams",
        `the agent is ${options.agent.agentId}, the identity ${options.identity.agentId}`,
        {
          problems: [{ path: "/agent", message: "must be the agent of the identity" }],
        },
      );
    }
    this.baseUrl = normaliseGatewayUrl(gateway);
    this.agent = options.agent;
    this.apiKey = options.apiKey;
    this.self = {
      agentId: options.identity.agentId,
      principalId: options.identity.principalId,
      layers: options.layers ?? [0, 1],
    };
    this.signer = createSigner(options.identity);
    this.registry = new GatewayClient({ gateway: this.baseUrl, apiKey: options.apiKey });
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  get agentId(): string {
    return this.self.agentId;
  }

  /** A registered agent's public view (keys, principal, versions), cached for this client's life. */
  view(agentId: string): Promise<AgentView> {
    let view = this.views.get(agentId);
    if (!view) {
      view = this.registry.getAgent(agentId);
      view.catch(() => this.views.delete(agentId));
      this.views.set(agentId, view);
    }
    return view;
  }

  /**
   * What this agent calls itself to `peer`: its id and principal, or, to an agent of another domain,
   * its address and its principal qualified with its domain (docs/federation.md).
   */
  async namesFor(peer: string): Promise<{ agentId: string; principalId: string }> {
    const { agentId, principalId } = this.self;
    if (domainOf(peer) === undefined) return { agentId, principalId };
    const address = (await this.view(agentId)).address;
    const domain = address === undefined ? undefined : domainOf(address);
    if (address === undefined || domain === undefined || domain === domainOf(peer))
      return { agentId, principalId };
    return { agentId: address, principalId: qualifiedPrincipal(principalId, domain) };
  }

  /** The handshake the relay requires before anything reaches `peer` (a no-op once established). */
  async reach(peer: string): Promise<void> {
    if (peer === this.agentId) return;
    if (!this.agent) {
      throw new AcpError(
        "InvalidParams",
        `messages to ${peer} need a connected agent (CollabClient option agent)`,
        {
          problems: [{ path: "/agent", message: "is required to reach other agents" }],
        },
      );
    }
    if (this.agent.handshakeState(peer) !== "established")
      await this.agent.handshake(peer, { timeoutMs: this.timeoutMs });
  }

  /**
   * As `reach`, but for a message the gateway may hold (a handoff offer): a peer that is not
   * registered is refused at once; one that is offline (and not custodial) and not yet met gets the
   * handshake started (it completes when the peer comes online) without waiting for it.
   */
  async reachOrQueue(peer: string): Promise<void> {
    let view: AgentView;
    try {
      // Not the cached view: whether the peer is online now matters.
      view = await this.registry.getAgent(peer);
    } catch (err) {
      if (err instanceof AcpError && (err.kind === "NotFound" || err.kind === "UnknownRecipient")) {
        throw new AcpError("UnknownRecipient", `no agent ${peer} is registered at the gateway`, {
          problems: [{ path: "/params/headers/recipient-id", message: "not a registered agent" }],
        });
      }
      throw err;
    }
    const established = this.agent?.handshakeState(peer) === "established";
    // A custodial peer never has a socket, but the gateway answers its handshake at once: waiting
    // for it means the peer's first step back (say, accepting the offer) finds the pair complete.
    if (!established && this.agent && view.presence.state === "offline" && !view.custodial) {
      // The peer answers the announce when it connects; the gateway holds the message until then.
      this.agent.handshake(peer, { timeoutMs: QUEUED_HANDSHAKE_MS }).catch(() => undefined);
      return;
    }
    await this.reach(peer);
  }

  /**
   * Builds and signs a notification (or, for `agent.handoff`, a request) to `to`. `body` may be a
   * function of the headers, for bodies that sign over the message id and timestamp.
   */
  async sign(
    method: string,
    to: string,
    body:
      | Record<string, unknown>
      | ((ids: { messageId: string; timestamp: string }) => Record<string, unknown>),
  ): Promise<Signed> {
    const self = { ...this.self, ...(await this.namesFor(to)) };
    const message: MethodMessage =
      method === "agent.handoff" ? buildHandoff(self, to, {}) : buildNotification(self, to, {}, { method });
    const headers = message.params.headers;
    headers["trust-layer-version"] = await this.version(to);
    const ids = { messageId: headers["message-id"] as string, timestamp: headers.timestamp };
    message.params.body = typeof body === "function" ? body(ids) : body;
    return { message: signMessage(message, this.signer), ...ids };
  }

  /** GET/POST on the gateway's REST API with this agent's key; failures are the gateway's AcpError. */
  /**
   * A collaboration call: its answer comes in the REST API's snake_case and is read under the SDK's
   * names (camelCase), as `NegotiationView`, `HandoffView`… have them.
   */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await requestGatewayJson(this.baseUrl, method, `${API_PREFIX}${path}`, {
      headers: { "x-api-key": this.apiKey },
      ...(body !== undefined ? { body } : {}),
    });
    return camelCased(answer) as T;
  }

  /** The protocol version the gateway requires for this pair (the highest both registered). */
  private async version(to: string): Promise<string> {
    const [mine, theirs] = await Promise.all([this.view(this.agentId), this.view(to)]);
    const agreed = negotiateVersion(mine.protocol_versions, theirs.protocol_versions);
    if (!agreed) throw new AcpError("NoCommonVersion", `${this.agentId} and ${to} share no protocol version`);
    return agreed;
  }
}

export const path = (...parts: string[]) => parts.map(encodeURIComponent).join("/");

/** How long a handshake with an offline peer is waited for in the background (its message is held meanwhile). */
const QUEUED_HANDSHAKE_MS = 24 * 3_600_000;
