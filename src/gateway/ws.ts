import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { Broker } from "../broker/index.js";
import { requestUrl } from "../http/server.js";
import { AcpError } from "../protocol/index.js";
import { ClientFrame, CONSUME_PARAM, MAX_ACK_PENDING_PARAM, type ServerFrame } from "../wire/api.js";
import type { ProtocolVersions } from "../wire/versions.js";
import { AgentSessions } from "./agent-sessions.js";
import { credentialOf } from "./auth.js";
import type { Credentials } from "./credentials.js";
import type { Metrics } from "./metrics.js";
import type { OpenedByKey } from "./opened-by-key.js";
import { OutboundBuffers } from "./outbound-buffers.js";
import type { PresenceTracker } from "./presence.js";
import type { ResolvedAgent } from "./registry.js";
import type { Relay } from "./relay.js";
import { SubmitIntake } from "./submit-intake.js";
import {
  DEFAULT_MAX_UNAUTHENTICATED_SOCKETS,
  type Pending,
  refuseUpgrade,
  UnauthenticatedSockets,
} from "./unauthenticated.js";
import {
  AgentSession,
  invalidWindow,
  NATIVE_FRAMING,
  type SessionFraming,
  type SocketFlow,
} from "./ws-session.js";

export interface WsOptions {
  heartbeatMs: number;
  maxInFlight: number;
  maxEnvelopeBytes: number;
  authTimeoutMs: number;
  gatewayId: string;
  /** WebSocket submissions in progress gateway-wide past which submitting connections are not read (SubmitIntake). */
  maxSubmitsInProgress: number;
  /** Bytes waiting in one socket past which it gets no more deliveries until it drains (OutboundBuffers). */
  socketBufferBytes?: number;
  /** Bytes waiting in all sockets past which no socket with a backlog gets more (OutboundBuffers). */
  outboundBufferBytes?: number;
  /** Connections still authenticating, gateway-wide, past which an upgrade gets 503 (UnauthenticatedSockets). */
  maxUnauthenticatedSockets?: number;
  /** Sockets of one agent at this gateway, at most (the next is refused with 4409). Default 64. */
  maxSocketsPerAgent?: number;
}

export const DEFAULT_MAX_SOCKETS_PER_AGENT = 64;

/** Close codes (RFC 6455 private range) so clients can tell why they were closed. */
export const CloseCode = {
  Unauthorized: 4401,
  RateLimited: 4429,
  /** The agent has `maxSocketsPerAgent` sockets here already. */
  TooManySockets: 4409,
  HeartbeatTimeout: 4408,
  ShuttingDown: 1001,
} as const;

/**
 * Agents' real-time connections: authenticate, then join the agent's other sockets at this
 * gateway (AgentSessions), which share its inbox out among them (offline queue first, in order) as
 * `new_message` frames; take acknowledgements, rejections, presence and submissions.
 */
export class WsHub {
  private readonly server: WebSocketServer;
  private readonly groups = new Map<string, AgentSessions>();
  private readonly sessions = new Set<AgentSession>();
  private readonly intake: SubmitIntake;
  readonly outbound: OutboundBuffers;
  readonly unauthenticated: UnauthenticatedSockets;

  constructor(
    private readonly deps: {
      broker: Broker;
      credentials: Credentials;
      openedByKey: OpenedByKey;
      versions: ProtocolVersions;
      relay: Relay;
      presence: PresenceTracker;
      metrics: Metrics;
      logger: Logger;
    },
    private readonly options: WsOptions,
  ) {
    this.server = new WebSocketServer({ noServer: true, maxPayload: options.maxEnvelopeBytes * 2 + 4096 });
    this.intake = new SubmitIntake(options.maxSubmitsInProgress, () =>
      deps.metrics.count("acp_ws_intake_paused_total"),
    );
    this.outbound = new OutboundBuffers(options.socketBufferBytes, options.outboundBufferBytes);
    this.unauthenticated = new UnauthenticatedSockets(
      options.maxUnauthenticatedSockets ?? DEFAULT_MAX_UNAUTHENTICATED_SOCKETS,
    );
  }

  get connectionCount(): number {
    return this.server.clients.size;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const headerKey = credentialOf(req.headers);
    const pending = this.unauthenticated.admit(socket, headerKey === undefined);
    if (!pending) {
      this.deps.metrics.count("acp_ws_upgrades_refused_total", { reason: "unauthenticated-cap" });
      refuseUpgrade(socket);
      return;
    }
    this.server.handleUpgrade(req, socket, head, (ws) => {
      pending.limitBytes();
      void this.accept(ws, req, headerKey, pending);
    });
  }

  async close(): Promise<void> {
    const sessions = [...this.sessions];
    await Promise.all(sessions.map((s) => s.stop(CloseCode.ShuttingDown, "gateway shutting down")));
    for (const ws of this.server.clients) ws.terminate();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async accept(
    ws: WebSocket,
    req: IncomingMessage,
    headerKey: string | undefined,
    pending: Pending,
  ): Promise<void> {
    const apiKey = headerKey ?? (await this.firstFrameKey(ws));
    let agent: ResolvedAgent | undefined;
    try {
      agent = apiKey ? await this.deps.credentials.agentOf(req, apiKey) : undefined;
    } catch (err) {
      if (err instanceof AcpError && err.kind === "RateLimited") {
        this.send(ws, { type: "error", error: err.toJSON() });
        ws.close(CloseCode.RateLimited, "too many failed credential checks");
        return;
      }
    } finally {
      pending.end();
    }
    if (!agent) {
      this.send(ws, {
        type: "error",
        error: new AcpError("Unauthorized", "a valid API key is required").toJSON(),
      });
      ws.close(CloseCode.Unauthorized, "unauthorized");
      return;
    }
    const flow = this.flowOf(req);
    if (flow instanceof AcpError) {
      this.send(ws, { type: "error", error: flow.toJSON() });
      ws.close(1008, "invalid connection parameters");
      return;
    }
    await this.attach(ws, agent, NATIVE_FRAMING, flow);
  }

  /**
   * Starts a session of the agent on an authenticated socket, one of the agent's sockets at this
   * gateway (whichever protocol each speaks: native, or Phoenix Channels); past the agent's limit
   * the socket is refused (4409). `onEnd` runs when the session ends. Undefined when the socket
   * closed meanwhile, or was refused.
   */
  async attach(
    ws: WebSocket,
    agent: ResolvedAgent,
    framing: SessionFraming,
    flow: SocketFlow,
    onEnd: () => void = () => undefined,
  ): Promise<AgentSession | undefined> {
    if (ws.readyState !== WebSocket.OPEN) return undefined;
    const agentId = agent.record.agentId;
    const group = this.groupOf(agentId);
    const limit = this.options.maxSocketsPerAgent ?? DEFAULT_MAX_SOCKETS_PER_AGENT;
    if (group.size >= limit) {
      const error = new AcpError("Conflict", `${agentId} has ${limit} connections to this gateway already`, {
        limit,
      });
      const text = framing.answer({ type: "error", error: error.toJSON() });
      if (text !== undefined) ws.send(text);
      framing.end(ws, CloseCode.TooManySockets, "too many connections for this agent");
      this.forgetIfEmpty(group);
      return undefined;
    }
    const deps = { ...this.deps, intake: this.intake, backlog: this.outbound.track(ws), group };
    const session = new AgentSession(
      ws,
      agent,
      deps,
      this.options,
      flow,
      () => {
        this.intake.forget(ws);
        releaseKey();
        this.sessions.delete(session);
        this.forgetIfEmpty(group);
        onEnd();
      },
      framing,
    );
    // A rotated key or a revoked agent closes the socket its old key opened.
    const releaseKey = this.deps.openedByKey.track(agent, (why) => {
      void session.stop(CloseCode.Unauthorized, why);
    });
    this.sessions.add(session);
    group.reserve(session);
    await session.start();
    return session;
  }

  private groupOf(agentId: string): AgentSessions {
    let group = this.groups.get(agentId);
    if (!group) {
      group = new AgentSessions(agentId, {
        broker: this.deps.broker,
        logger: this.deps.logger,
        maxInFlight: this.options.maxInFlight,
      });
      this.groups.set(agentId, group);
    }
    return group;
  }

  private forgetIfEmpty(group: AgentSessions): void {
    if (group.size === 0 && this.groups.get(group.agentId) === group) this.groups.delete(group.agentId);
  }

  /** The socket's window and way of consuming, from the upgrade's query (CONSUME_PARAM, MAX_ACK_PENDING_PARAM). */
  private flowOf(req: IncomingMessage): SocketFlow | AcpError {
    const query = requestUrl(req).searchParams;
    const consume = query.get(CONSUME_PARAM) ?? "all";
    if (consume !== "all" && consume !== "replies") {
      return new AcpError("InvalidParams", `consume must be "all" or "replies"`, {
        problems: [{ path: `/${CONSUME_PARAM}`, message: 'must be "all" or "replies"' }],
      });
    }
    const given = query.get(MAX_ACK_PENDING_PARAM);
    if (given === null) return { consume, maxAckPending: this.options.maxInFlight };
    const value = Number(given);
    return Number.isInteger(value) && value >= 1 && value <= this.options.maxInFlight
      ? { consume, maxAckPending: value }
      : invalidWindow(this.options.maxInFlight);
  }

  /** Browsers cannot set headers on a WebSocket: the first frame may carry the key instead. */
  private firstFrameKey(ws: WebSocket): Promise<string | undefined> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), this.options.authTimeoutMs);
      ws.once("message", (data: RawData) => {
        clearTimeout(timer);
        try {
          const frame = ClientFrame.parse(JSON.parse(data.toString()));
          resolve(frame.type === "auth" ? frame.apiKey : undefined);
        } catch {
          resolve(undefined);
        }
      });
      ws.once("close", () => resolve(undefined));
    });
  }

  private send(ws: WebSocket, frame: ServerFrame): void {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
  }
}
