import type { HandshakeEvent, PeerHandshake } from "../handshake/index.js";
import type { TrustPolicy, TrustRecord } from "../identity/index.js";
import type {
  AcpMessage,
  AnnounceBody,
  CapabilitiesBody,
  EnvelopeHeaders,
  ErrorObject,
  HandoffBody,
  JsonRpcId,
  MessageKind,
  PrivateIdentity,
} from "../protocol/index.js";
import type { AgentView } from "../wire/agents.js";
import type { HandshakeProofView, PresenceUpdate } from "../wire/api.js";
import type { VersionDeprecation } from "../wire/versions.js";
import type { AuditSettings } from "./audit.js";
import type { AgentConnection, ConnectionEvents, ReconnectOptions } from "./connection.js";
import type { HandledStore } from "./handled-store.js";
import type { DegradedInfo, RecoveredInfo } from "./health.js";
import type { ResubmitInfo, SubmitRetryOptions } from "./outbox.js";

export interface AcpAgentOptions {
  /** The gateway's base URL, e.g. `http://127.0.0.1:8700`. */
  gateway: string;
  /** The agent's private identity; or give `keyFile` (from `acp keygen`). */
  identity?: PrivateIdentity;
  keyFile?: string;
  /** The API key the gateway issued at registration. */
  apiKey: string;
  /** skill-layers-loaded declared on every message. Default [0, 1]. */
  layers?: number[];
  /** The body of this agent's `agent.announce` (handshake step 1). */
  announce?: AnnounceBody;
  /** The body of this agent's `agent.capabilities` (handshake step 3). */
  capabilities?: CapabilitiesBody;
  /** Which principals this agent's principal knows or shares context with (initial trust). */
  trust?: TrustPolicy;
  /** Where the audit log goes; `false` disables it (not ACP-compliant, for throwaway tools). */
  audit?: AuditSettings | false;
  /**
   * Where the agent's state survives restarts (default root `$ACP_STATE_DIR`, else the user state
   * directory: `$XDG_STATE_HOME/acp`, `~/.local/state/acp`; see state-dir.ts):
   * completed handshakes (`<root>/<agent-id>/handshakes.json`) and the ids of the deliveries already
   * handed to the application (`<root>/<agent-id>/handled.log`), so a restarted agent acknowledges a
   * redelivery without running its handler again. `false`: both live in memory only.
   */
  state?: { root?: string } | false;
  /**
   * The application's record of handled messages (see HandledStore, SqliteHandledStore): asked
   * before each handler runs and trusted, so a handler that records its message handled in the same
   * transaction as its own effect runs exactly once, across crashes. It replaces `handled.log`.
   */
  handledStore?: HandledStore;
  /**
   * How old (or how far in the future) a delivered message's timestamp may be. Default: 7 days and
   * 5 minutes, the gateway's retention plus clock skew, so an offline queue is still accepted.
   */
  replayWindowMs?: number;
  reconnect?: ReconnectOptions;
  /**
   * Resending a submission whose outcome is unknown (the socket dropped before the gateway's answer;
   * 503 -32018) or rate-limited (429, after its Retry-After), as the identical signed envelope.
   * Default `{ maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 5000 }`; always within the
   * caller's `timeoutMs` as well.
   */
  submitRetry?: SubmitRetryOptions;
  /** Default timeout of request, handoff, notify and handshake. Default 30 s. */
  requestTimeoutMs?: number;
  /**
   * A substantive message from a peer this agent has no completed handshake with (it lost its
   * state: another directory or machine, `state: false`) is held, unacknowledged, while the agent
   * completes a new handshake with the peer; past this long without one it is refused (-32004).
   * Default 10 minutes.
   */
  handshakeWaitMs?: number;
  /** A peer that declares no skill layers: decline it (default) or accept it with maximum caution. */
  undeclaredLayers?: "decline" | "maximum-caution";
  /**
   * "all" (default): this connection takes a share of the agent's queue (with the agent's other
   * receiving connections, if it has several). "replies": only what the gateway routes to this
   * connection, the responses to its own requests and the handshake replies to its own announces;
   * the rest stays for the agent's receiving connections. For one-shot senders such as `acp send`
   * beside the agent's running consumer.
   */
  consume?: "all" | "replies";
  /**
   * Flow control, as an AMQP consumer's prefetch count. `concurrency` handlers (requests,
   * notifications, handoffs) run at once, default 32; `prefetch` more deliveries wait ready behind
   * them, default 32. The gateway sends this agent no more unacknowledged deliveries than the two
   * together (at most 256), so the rest of its queue waits at the gateway, where no ack wait runs.
   * Responses and handshake messages take no handler slot. While a delivery is in hand (running
   * or waiting for a slot) the agent tells the gateway it is working on it, every third of the ack
   * wait, so a slow handler never has its message redelivered or dead-lettered.
   */
  flow?: { concurrency?: number; prefetch?: number };
  /**
   * Replaces the WebSocket to the gateway (then `reconnect` and `submitRetry` do not apply). For a
   * gateway's own agents, which reach its relay and broker in the same process. Such a connection
   * is trusted: a delivery it marks `verifiedByRelay` is not verified again by the agent.
   */
  connection?: (agentId: string, events: ConnectionEvents) => AgentConnection;
  /**
   * Replaces the REST calls the agent makes at its gateway (registry look-ups, presence). With
   * `connection`, for a gateway's own agents: their API key then never leaves the process.
   */
  directory?: AgentDirectory;
}

/** The registry reads and presence writes an agent makes at its gateway (REST by default: GatewayClient). */
export interface AgentDirectory {
  /** The agent's record as GET /api/v1/agents/:id answers it (snake_case). */
  getAgent(agentId: string): Promise<AgentView>;
  updatePresence(agentId: string, update: PresenceUpdate): Promise<unknown>;
  /** The peer's side of its latest handshake with this agent, as relayed (GET /handshakes/:peer); undefined if none. */
  handshakeProof?(peer: string): Promise<HandshakeProofView | undefined>;
}

/** What a handler knows about the message it handles; everything here has been verified. */
export interface InboundContext {
  from: string;
  principalId: string;
  method: string;
  type: EnvelopeHeaders["message-type"];
  /** The JSON-RPC id (requests and handoffs). */
  id: JsonRpcId | undefined;
  messageId: string;
  headers: EnvelopeHeaders;
  /** The body arrived end-to-end encrypted (the handler sees it decrypted; the reply is encrypted too). */
  encrypted: boolean;
  handshake: PeerHandshake;
  trust: TrustRecord | undefined;
}

/** Whatever it returns (a JSON object, or nothing for `{}`) is the signed response body. */
export type RequestHandler = (body: Record<string, unknown>, context: InboundContext) => unknown;
export type NotificationHandler = (body: Record<string, unknown>, context: InboundContext) => unknown;
/** Returns the answer to a handoff, e.g. `{ accepted: true }` or `{ accepted: false, reason }`. */
export type HandoffHandler = (handoff: HandoffBody, context: InboundContext) => unknown;

/** Every verified message the agent received (the body decrypted), for the `message` event. */
export interface InboundMessage {
  kind: MessageKind;
  /** `agent.response` for responses and error responses. */
  method: string;
  from: string;
  principalId: string;
  messageId: string;
  id: JsonRpcId | null | undefined;
  headers: EnvelopeHeaders;
  body: Record<string, unknown> | undefined;
  error: ErrorObject | undefined;
  encrypted: boolean;
  /** The signed envelope exactly as received. */
  envelope: AcpMessage;
}

export interface AgentEvents {
  message: (message: InboundMessage) => void;
  handshake: (event: HandshakeEvent) => void;
  connected: (info: {
    gateway: string;
    heartbeatMs: number;
    ackWaitMs: number;
    reconnected: boolean;
  }) => void;
  disconnected: (info: { code: number; reason: string; willReconnect: boolean }) => void;
  /** A submission is about to be sent again (its first outcome was unknown, or a 503/429). */
  resubmit: (info: ResubmitInfo) => void;
  /**
   * Something to act on that does not stop the agent: the gateway announced that the protocol
   * version it speaks is deprecated (once per version; unheard, it becomes a process warning).
   */
  warning: (warning: AgentWarning) => void;
  /**
   * The gateway or its broker started failing in ways the SDK works around (refused writes during
   * a NATS stream-leader election, acknowledgements not taken): once, however many failures follow.
   */
  degraded: (info: DegradedInfo) => void;
  /** The gateway has worked again, with no failure for 6 s, after `degraded`. */
  recovered: (info: RecoveredInfo) => void;
  /** Something the application must act on (its handler threw, its store failed, a peer misbehaved). */
  error: (err: Error) => void;
}

/** The `warning` event. */
export interface AgentWarning {
  code: "ProtocolDeprecated";
  /** For people: which version, and from when it will be refused. */
  message: string;
  deprecation: VersionDeprecation;
}

/** What every send takes: request, notify and handoff options build on it. */
export interface SendOptions {
  /**
   * How long the whole exchange may take (handshake, submission and, for a request or handoff, the
   * response); default `requestTimeoutMs`.
   */
  timeoutMs?: number;
  /** Aborting it cancels the send (-32020 Cancelled). */
  signal?: AbortSignal;
  /** Encrypt the body end to end to the peer's registered X25519 key. */
  encrypt?: boolean;
  /** The human-readable summary for the audit log (else one is generated from the body). */
  summary?: string;
}

export interface RequestOptions extends SendOptions {
  /** `agent.request` (default) or an extension method such as `agent.command`. */
  method?: string;
}

export interface NotifyOptions extends SendOptions {
  /** `agent.notification` (default) or an extension method. */
  method?: string;
}

/** A handoff's method is always `agent.handoff`: the send options alone. */
export type HandoffOptions = SendOptions;

export interface PresenceInput {
  state?: "online" | "busy" | "away";
  load?: number;
  activeTasks?: number;
  tasks?: { id: string; title?: string; progress?: number }[];
  metrics?: { responseTimeMs: number; errorRate: number };
}
