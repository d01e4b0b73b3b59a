import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { Broker } from "../broker/index.js";
import { AcpError } from "../protocol/index.js";
import { requestUrl } from "../http/server.js";
import { credentialOf } from "./auth.js";
import type { Credentials } from "./credentials.js";
import type { OpenedByKey } from "./opened-by-key.js";
import type { Metrics } from "./metrics.js";
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
import { ClientFrame, MAX_ACK_PENDING_PARAM, type ServerFrame } from "../wire/api.js";
import { invalidWindow, NATIVE_WIRE, Session, type SessionWire } from "./ws-session.js";
import type { ProtocolVersions } from "../wire/versions.js";

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
}

/** Close codes (RFC 6455 private range) so clients can tell why they were closed. */
export const CloseCode = {
  Unauthorized: 4401,
  RateLimited: 4429,
  Replaced: 4409,
  HeartbeatTimeout: 4408,
  ShuttingDown: 1001,
} as const;

/**
 * Agents' real-time connections: authenticate, stream the agent's inbox (offline queue first, in
 * order) as `new_message` frames, take acknowledgements, rejections, presence and submissions.
 * One inbox per agent per gateway: a new connection replaces the previous one.
 */
export class WsHub {
  private readonly server: WebSocketServer;
  private readonly sessions = new Map<string, Session>();
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
    const sessions = [...this.sessions.values()];
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
    const maxAckPending = this.windowOf(req);
    if (maxAckPending instanceof AcpError) {
      this.send(ws, { type: "error", error: maxAckPending.toJSON() });
      ws.close(1008, "invalid maxAckPending");
      return;
    }
    await this.attach(ws, agent, NATIVE_WIRE, maxAckPending);
  }

  /**
   * Starts the agent's session on an authenticated socket, replacing the one it had (one inbox per
   * agent per gateway, whichever protocol each socket speaks: native, or Phoenix Channels).
   * `onEnd` runs when the session ends. Undefined when the socket closed meanwhile.
   */
  async attach(
    ws: WebSocket,
    agent: ResolvedAgent,
    wire: SessionWire,
    maxAckPending: number,
    onEnd: () => void = () => undefined,
  ): Promise<Session | undefined> {
    const agentId = agent.record.agentId;
    const previous = this.sessions.get(agentId);
    if (previous) await previous.stop(CloseCode.Replaced, "replaced by a newer connection");
    if (ws.readyState !== WebSocket.OPEN) return undefined;
    const deps = { ...this.deps, intake: this.intake, backlog: this.outbound.track(ws) };
    const end = () => {
      this.intake.forget(ws);
      releaseKey();
      if (this.sessions.get(agentId) === session) this.sessions.delete(agentId);
      onEnd();
    };
    const session = new Session(ws, agent, deps, this.options, maxAckPending, end, wire);
    // A rotated key or a revoked agent closes the socket its old key opened.
    const releaseKey = this.deps.openedByKey.track(agent, (why) => {
      void session.stop(CloseCode.Unauthorized, why);
    });
    this.sessions.set(agentId, session);
    await session.start();
    return session;
  }

  /** The socket's window from the upgrade's query (MAX_ACK_PENDING_PARAM); the agent's limit without one. */
  private windowOf(req: IncomingMessage): number | AcpError {
    const given = requestUrl(req).searchParams.get(MAX_ACK_PENDING_PARAM);
    if (given === null) return this.options.maxInFlight;
    const value = Number(given);
    return Number.isInteger(value) && value >= 1 && value <= this.options.maxInFlight
      ? value
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
