/**
 * The messaging platform's real-time delivery: Phoenix Channels over WebSocket, at
 * `/socket/websocket` (what a Phoenix client's `new Socket("/socket")` connects to), beside the
 * native protocol at `/api/v1/ws`. Same inbox, same guarantees: a joined channel is a session of
 * the hub (ws-session.ts) speaking Phoenix's framing; its window, ack waits, redelivery and its share
 * of the agent's queue (one of the agent's receiving sockets) are the hub's.
 *
 * Phoenix's JSON serializer 2.0.0: every message is `[join_ref, ref, topic, event, payload]`.
 * - Authenticated before the upgrade completes, with the agent's API key: an `X-API-Key` or
 *   `Authorization: Bearer` header, the client's `authToken` (sent as the `Sec-WebSocket-Protocol`
 *   `base64url.bearer.phx.<token>`), or the connect param `api_key`. Without a valid one, no socket.
 * - `phx_join` of `messages:{agent_id}` (the agent's own topic only) starts the session; its reply
 *   carries what the native `ready` frame does. Deliveries are `new_message` pushes; the agent
 *   pushes `acknowledge` `{id}`, `reject` `{id, reason}` and `working` `{id}`, each answered with a
 *   `phx_reply`. `phx_leave` ends the session and keeps the socket; `heartbeat` on topic `phoenix`
 *   is answered as Phoenix servers do.
 */
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { Delivery } from "../broker/index.js";
import { requestUrl } from "../http/server.js";
import { AcpError, type JsonRpcErrorObject, problemsOf } from "../protocol/index.js";
import { ClientFrame, type ServerFrame } from "../wire/api.js";
import { credentialOf } from "./auth.js";
import type { Credentials } from "./credentials.js";
import type { Metrics } from "./metrics.js";
import { corkUntilNextTurn } from "./outbound-buffers.js";
import type { ResolvedAgent } from "./registry.js";
import { CloseCode, type WsHub } from "./ws.js";
import {
  type AgentSession,
  invalidWindow,
  isPlainAck,
  type ReadyFrame,
  type SessionFraming,
} from "./ws-session.js";

/** Phoenix's JSON serializer, the one version spoken here. */
export const PHOENIX_VSN = "2.0.0";
/** What a Phoenix client's `authToken` becomes in `Sec-WebSocket-Protocol`. */
const AUTH_TOKEN_PREFIX = "base64url.bearer.phx.";
/** The events an agent pushes on its channel, as the native frames of the same name. */
const AGENT_EVENTS = new Set(["acknowledge", "reject", "working"]);
/** Deliveries a channel remembers the sender of, so a push may name a message by its id alone. */
const REMEMBERED_SENDERS = 1024;
/** Joins and leaves a socket may have waiting: each one opens or closes the agent's inbox. */
const MAX_PENDING_LIFECYCLE = 4;

type Ref = string | null;
type PhoenixMessage = [
  joinRef: Ref,
  ref: Ref,
  topic: string,
  event: string,
  payload: Record<string, unknown>,
];

export interface PhoenixOptions {
  maxEnvelopeBytes: number;
  /** The most deliveries the gateway hands one agent at a time: a join's `max_ack_pending` at most. */
  maxInFlight: number;
}

/** Phoenix Channels sockets; one per agent connection, each with at most its own messages channel. */
export class PhoenixChannels {
  private readonly server: WebSocketServer;

  constructor(
    private readonly hub: WsHub,
    private readonly deps: { credentials: Credentials; metrics: Metrics },
    private readonly options: PhoenixOptions,
  ) {
    this.server = new WebSocketServer({
      noServer: true,
      maxPayload: options.maxEnvelopeBytes * 2 + 4096,
      // A client that sends its token as a subprotocol offers "phoenix" beside it: that one is chosen.
      handleProtocols: (protocols) => (protocols.has("phoenix") ? "phoenix" : false),
    });
  }

  get connectionCount(): number {
    return this.server.clients.size;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => undefined);
    void this.authenticate(req).then((outcome) => {
      if (outcome instanceof AcpError) {
        this.deps.metrics.count("acp_ws_upgrades_refused_total", { reason: "phoenix-" + outcome.reason });
        refuse(socket, outcome);
        return;
      }
      if (socket.destroyed) return;
      this.server.handleUpgrade(req, socket, head, (ws) => {
        new PhoenixConnection(ws, outcome, this.hub, this.options).start();
      });
    });
  }

  close(): void {
    for (const ws of this.server.clients) ws.close(CloseCode.ShuttingDown, "gateway shutting down");
    this.server.close();
  }

  /** The agent the upgrade's credentials name, or why there is none: never an unauthenticated socket. */
  private async authenticate(req: IncomingMessage): Promise<ResolvedAgent | AcpError> {
    let url: URL;
    try {
      url = requestUrl(req);
    } catch (err) {
      return err as AcpError;
    }
    const vsn = url.searchParams.get("vsn");
    if (vsn !== PHOENIX_VSN) {
      return new AcpError(
        "InvalidParams",
        `Phoenix's JSON serializer ${PHOENIX_VSN} is the one spoken here`,
        {
          problems: [{ path: "vsn", message: `must be ${PHOENIX_VSN}, got ${JSON.stringify(vsn)}` }],
        },
      );
    }
    const key =
      credentialOf(req.headers) ??
      tokenOfProtocols(req.headers["sec-websocket-protocol"]) ??
      (url.searchParams.get("api_key") || undefined);
    if (key === undefined) {
      return new AcpError(
        "Unauthorized",
        "the agent's API key is required: an X-API-Key header, the client's authToken, or the connect param api_key",
      );
    }
    let agent: ResolvedAgent | undefined;
    try {
      agent = await this.deps.credentials.agentOf(req, key);
    } catch (err) {
      if (err instanceof AcpError) return err;
      throw err;
    }
    if (!agent) return new AcpError("Unauthorized", "a valid API key is required");
    if (agent.record.custodial) {
      return new AcpError(
        "Forbidden",
        "a custodial agent has no socket: the gateway serves its inbox (it works through the MCP endpoint and REST)",
      );
    }
    return agent;
  }
}

/** The API key a Phoenix client sent as its `authToken` subprotocol, if it did. */
function tokenOfProtocols(header: string | undefined): string | undefined {
  for (const protocol of header?.split(",") ?? []) {
    const value = protocol.trim();
    if (value.startsWith(AUTH_TOKEN_PREFIX)) {
      const token = Buffer.from(value.slice(AUTH_TOKEN_PREFIX.length), "base64url").toString("utf8");
      return token.length > 0 ? token : undefined;
    }
  }
  return undefined;
}

/** The HTTP answer to an upgrade refused before any socket exists, with the JSON-RPC error. */
function refuse(socket: Duplex, error: AcpError): void {
  if (socket.destroyed) return;
  const status =
    error.kind === "Unauthorized"
      ? 401
      : error.kind === "RateLimited"
        ? 429
        : error.kind === "Forbidden"
          ? 403
          : 400;
  const body = JSON.stringify({ jsonrpc: "2.0", error: error.toJSON(), id: null });
  socket.end(
    `HTTP/1.1 ${status} ${status === 401 ? "Unauthorized" : status === 403 ? "Forbidden" : status === 429 ? "Too Many Requests" : "Bad Request"}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** One agent's Phoenix socket and its channel, once joined. */
class PhoenixConnection {
  private channel: { joinRef: Ref; topic: string; session: AgentSession } | undefined;
  /**
   * The sender of each message delivered on this socket lately, by id (null: two senders used the
   * id). Message ids are per sender, and the platform's pushes name a message by its id: the
   * sender is filled in when the id is unambiguous, and must be given (`from`) when it is not.
   */
  private readonly senders = new Map<string, string | null>();
  /** Joins and leaves in the order they came; `pendingLifecycle` of them not done yet. */
  private lifecycle: Promise<void> = Promise.resolve();
  private pendingLifecycle = 0;
  private readonly topic: string;

  constructor(
    private readonly ws: WebSocket,
    private readonly agent: ResolvedAgent,
    private readonly hub: WsHub,
    private readonly options: PhoenixOptions,
  ) {
    this.topic = `messages:${agent.record.agentId}`;
  }

  start(): void {
    this.ws.on("message", (data: RawData, isBinary: boolean) => this.receive(data, isBinary));
    this.ws.on("pong", () => this.channel?.session.alive());
    const end = () => void this.channel?.session.stop();
    this.ws.on("close", end);
    this.ws.on("error", end);
  }

  private receive(data: RawData, isBinary: boolean): void {
    const message = isBinary ? undefined : parse(data.toString());
    if (!message) {
      this.ws.close(
        1007,
        `not a Phoenix ${PHOENIX_VSN} message: [join_ref, ref, topic, event, payload] in JSON text`,
      );
      return;
    }
    const [joinRef, ref, topic, event, payload] = message;
    if (topic === "phoenix" && event === "heartbeat") {
      this.channel?.session.alive();
      this.reply(null, ref, topic, "ok", {});
      return;
    }
    if (event === "phx_join" || event === "phx_leave") {
      // Bounded: a client that floods joins must not queue unbounded inbox opens.
      if (this.pendingLifecycle >= MAX_PENDING_LIFECYCLE) {
        this.reply(joinRef, ref, topic, "error", { reason: "too many joins in progress" });
        return;
      }
      this.pendingLifecycle += 1;
      const step =
        event === "phx_join"
          ? () => this.join(joinRef ?? ref, ref, topic, payload)
          : () => this.leave(joinRef, ref, topic);
      this.lifecycle = this.lifecycle.then(step).finally(() => {
        this.pendingLifecycle -= 1;
      });
      return;
    }
    const channel = this.channel;
    if (!channel || channel.topic !== topic || channel.joinRef !== joinRef) {
      this.reply(joinRef, ref, topic, "error", { reason: "unmatched topic" });
      return;
    }
    if (!AGENT_EVENTS.has(event)) {
      this.reply(joinRef, ref, topic, "error", {
        reason: `unknown event ${JSON.stringify(event)}: acknowledge, reject or working`,
      });
      return;
    }
    const from = payload["from"] ?? this.senders.get(String(payload["id"]));
    const given = { ...payload, ...(from ? { from } : {}), type: event };
    const frame = isPlainAck(given) ? { success: true as const, data: given } : ClientFrame.safeParse(given);
    if (!frame.success) {
      const error = new AcpError("InvalidParams", `invalid ${event} payload`, {
        problems: problemsOf(frame.error),
      });
      this.reply(joinRef, ref, topic, "error", errorResponse(error.toJSON()));
      return;
    }
    void channel.session.handle(frame.data, data.toString().length).then((answer?: ServerFrame) => {
      if (answer?.type === "error") this.reply(joinRef, ref, topic, "error", errorResponse(answer.error));
      else this.reply(joinRef, ref, topic, "ok", {});
    });
  }

  private async join(joinRef: Ref, ref: Ref, topic: string, payload: Record<string, unknown>): Promise<void> {
    if (topic !== this.topic) {
      const another = topic.startsWith("messages:");
      this.reply(joinRef, ref, topic, "error", {
        reason: another ? "unauthorized" : "unmatched topic",
        ...(another && {
          message: `this socket is ${this.agent.record.agentId}'s: it may join ${this.topic} only`,
        }),
      });
      return;
    }
    const window = payload["max_ack_pending"] ?? this.options.maxInFlight;
    if (
      !Number.isInteger(window) ||
      (window as number) < 1 ||
      (window as number) > this.options.maxInFlight
    ) {
      this.reply(
        joinRef,
        ref,
        topic,
        "error",
        errorResponse(invalidWindow(this.options.maxInFlight).toJSON()),
      );
      return;
    }
    // A rejoin (the client's channel errored, or joined again) replaces the channel's session.
    await this.channel?.session.stop();
    const framing = phoenixFraming(joinRef, ref, topic, (delivery) => this.delivered(delivery));
    const flow = { consume: "all" as const, maxAckPending: window as number };
    const session = await this.hub.attach(this.ws, this.agent, framing, flow, () => {
      if (this.channel?.session === session) this.channel = undefined;
    });
    if (session && this.ws.readyState === WebSocket.OPEN) this.channel = { joinRef, topic, session };
  }

  private async leave(joinRef: Ref, ref: Ref, topic: string): Promise<void> {
    const channel = this.channel;
    if (channel?.topic === topic) {
      this.channel = undefined;
      // The socket stays; what the agent did not acknowledge waits for its next join.
      await channel.session.stop();
    }
    this.reply(joinRef, ref, topic, "ok", {});
    this.send([joinRef, joinRef, topic, "phx_close", {}]);
  }

  private delivered(delivery: Delivery): void {
    const known = this.senders.get(delivery.id);
    this.senders.delete(delivery.id);
    this.senders.set(delivery.id, known === undefined || known === delivery.from ? delivery.from : null);
    if (this.senders.size > REMEMBERED_SENDERS)
      this.senders.delete(this.senders.keys().next().value as string);
  }

  private reply(joinRef: Ref, ref: Ref, topic: string, status: "ok" | "error", response: unknown): void {
    this.send([joinRef, ref, topic, "phx_reply", { status, response }]);
  }

  private send(message: unknown[]): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    corkUntilNextTurn(this.ws);
    this.ws.send(JSON.stringify(message));
  }
}

/** A session's frames on the channel `topic` joined by the join push `joinRef` / `ref`. */
function phoenixFraming(
  joinRef: Ref,
  ref: Ref,
  topic: string,
  onDelivery: (delivery: Delivery) => void,
): SessionFraming {
  const head = `[${JSON.stringify(joinRef)},null,${JSON.stringify(topic)},`;
  return {
    // The connection routes the socket's messages, pongs and end to the channel's session.
    listen: () => undefined,
    ready: (frame: ReadyFrame) =>
      JSON.stringify([
        joinRef,
        ref,
        topic,
        "phx_reply",
        {
          status: "ok",
          response: {
            agent_id: frame.agentId,
            gateway: frame.gateway,
            heartbeat_ms: frame.heartbeatMs,
            ack_wait_ms: frame.ackWaitMs,
            max_ack_pending: frame.maxAckPending,
            ...(frame.deprecation && { deprecation: frame.deprecation }),
          },
        },
      ]),
    // Built by concatenation, as the native frame: the stored envelope is embedded as is.
    delivery: (d: Delivery) => {
      onDelivery(d);
      return `${head}"new_message",{"id":${JSON.stringify(d.id)},"from":${JSON.stringify(d.from)},"kind":"${d.kind}","method":${JSON.stringify(d.method)},"attempt":${d.attempt},"priority":"${d.priority}","envelope":${d.envelope}}]`;
    },
    // Answers go out as the replies to the pushes that asked (PhoenixConnection).
    answer: () => undefined,
    end: (ws, code, reason) => {
      if (code === CloseCode.TooManySockets && ws.readyState === WebSocket.OPEN) {
        // The agent has as many sockets as the gateway takes: this channel closes, the socket stays.
        ws.send(JSON.stringify([joinRef, joinRef, topic, "phx_close", { reason: reason ?? "too many" }]));
      } else ws.close(code, reason);
    },
  };
}

/** The reply payload of a refused push: Phoenix's `reason`, and the JSON-RPC error's code and data. */
function errorResponse(error: JsonRpcErrorObject): Record<string, unknown> {
  return { reason: error.message, code: error.code, ...(error.data !== undefined && { data: error.data }) };
}

/** `[join_ref, ref, topic, event, payload]`, or undefined for anything else. */
function parse(text: string): PhoenixMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 5) return undefined;
  const [joinRef, ref, topic, event, payload] = value as unknown[];
  const isRef = (r: unknown) => r === null || typeof r === "string";
  if (!isRef(joinRef) || !isRef(ref) || typeof topic !== "string" || typeof event !== "string")
    return undefined;
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return undefined;
  return value as PhoenixMessage;
}
