import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { type RawData, WebSocket } from "ws";
import { brokerToAcp } from "../broker/errors.js";
import type { Broker, Delivery, MessageRef } from "../broker/index.js";
import { refKey } from "../broker/validation.js";
import { AcpError, problemsOf, toErrorObject } from "../protocol/index.js";
import { ClientFrame, type ServerFrame } from "../wire/api.js";
import type { ProtocolVersions } from "../wire/versions.js";
import type { AgentSessions, GroupMember } from "./agent-sessions.js";
import { DeliveryWindow } from "./delivery-window.js";
import type { Metrics } from "./metrics.js";
import { corkUntilNextTurn, type SocketBacklog } from "./outbound-buffers.js";
import type { PresenceTracker } from "./presence.js";
import type { ResolvedAgent } from "./registry.js";
import type { Relay } from "./relay.js";
import { type SettleFrame, SettleRetries } from "./settle-retries.js";
import type { SubmitIntake } from "./submit-intake.js";
import type { WsOptions } from "./ws.js";

/** How a socket consumes (the `consume` query parameter, CONSUME_PARAM) and its window. */
export interface SocketFlow {
  maxAckPending: number;
  consume: "all" | "replies";
}

/** The frame that tells the agent its inbox follows. */
export type ReadyFrame = Extract<ServerFrame, { type: "ready" }>;

/**
 * How a session's frames look on its socket: the native protocol (NATIVE_FRAMING), or Phoenix
 * Channels (phoenix.ts). The session's inbox, window, heartbeat and settling are the same for both.
 */
export interface SessionFraming {
  /** Passes the socket's events to the session: its frames (`receive`), pongs (`alive`), its end (`stop`). */
  listen(session: AgentSession, ws: WebSocket): void;
  /** The text of the ready frame (Phoenix: the channel join's reply). */
  ready(frame: ReadyFrame): string;
  /** The text of one delivery. */
  delivery(delivery: Delivery): string;
  /** The text of an answer the session sends unasked for (native frames; undefined: not sent). */
  answer(frame: ServerFrame): string | undefined;
  /** Ends the session on the socket (native: closes it with `code`); undefined: the socket stays. */
  end(ws: WebSocket, code: number, reason: string | undefined): void;
}

/** The gateway's own protocol on `/api/v1/ws` (docs/gateway.md): JSON frames with a `type`. */
export const NATIVE_FRAMING: SessionFraming = {
  listen(session, ws) {
    ws.on("message", (data: RawData, isBinary: boolean) => session.receive(data, isBinary));
    ws.on("pong", () => session.alive());
    ws.on("close", () => void session.stop());
    ws.on("error", () => void session.stop());
  },
  ready: (frame) => JSON.stringify(frame),
  delivery: deliveryFrame,
  answer: (frame) => JSON.stringify(frame),
  end: (ws, code, reason) => ws.close(code, reason),
};

/**
 * One agent's WebSocket, authenticated before it is made; one of the agent's sockets at this
 * gateway (AgentSessions). Sends what its group hands it as `new_message` frames, within its
 * window and send buffer, and takes acknowledgements, rejections, in-progress notices, presence
 * and submissions; a request it submits carries its route, so the answer comes back to it.
 */
export class AgentSession implements GroupMember {
  readonly id = randomBytes(12).toString("base64url");
  readonly route: string;
  readonly receives: boolean;
  private lastSeen = Date.now();
  private heartbeat: NodeJS.Timeout | undefined;
  private joined = false;
  private paused = false;
  private stopped = false;
  private ended: Promise<void> | undefined;
  private readonly agentId: string;
  private readonly window: DeliveryWindow;
  /** Routed deliveries not acknowledged yet, by `refKey`. */
  private readonly routedOut = new Map<string, MessageRef>();
  private readonly settleRetries: SettleRetries;

  constructor(
    private readonly ws: WebSocket,
    private readonly agent: ResolvedAgent,
    private readonly deps: {
      broker: Broker;
      /** The protocol version table, to tell an agent on a deprecated version so in `ready`. */
      versions: ProtocolVersions;
      relay: Relay;
      presence: PresenceTracker;
      metrics: Metrics;
      logger: Logger;
      intake: SubmitIntake;
      backlog: SocketBacklog;
      group: AgentSessions;
    },
    private readonly options: WsOptions,
    flow: SocketFlow,
    private readonly onEnd: () => void,
    private readonly framing: SessionFraming = NATIVE_FRAMING,
  ) {
    this.agentId = agent.record.agentId;
    this.route = `${deps.broker.instanceId}/${this.id}`;
    this.receives = flow.consume === "all";
    this.window = new DeliveryWindow(flow.maxAckPending, () => deps.group.wake());
    this.settleRetries = new SettleRetries(
      (frame) => this.settle(frame),
      (outcome) => deps.metrics.count("acp_settle_retries_total", { outcome }),
    );
  }

  async start(): Promise<void> {
    this.framing.listen(this, this.ws);
    if (this.agent.record.custodial) {
      // Its inbox is served by the gateway that holds its keys (src/extensions/custody).
      this.ws.close(1008, "a custodial agent has no socket: it works through the MCP endpoint");
      return;
    }
    try {
      await this.deps.group.join(this);
    } catch (err) {
      this.deps.logger.warn({ agent: this.agentId, err: (err as Error).message }, "cannot open inbox");
      this.ws.close(1011, "inbox unavailable");
      return;
    }
    // The socket may have gone while the inbox was opening: `stop` leaves the group then.
    if (this.stopped) return;
    this.joined = true;
    await this.deps.presence.connected(this.agentId).catch(() => undefined);
    this.deps.metrics.count("acp_ws_connections_total");
    const deprecation = this.deps.versions.deprecationOf(this.agent.record.protocolVersions);
    this.sendText(
      this.framing.ready({
        type: "ready",
        agentId: this.agentId,
        gateway: this.options.gatewayId,
        heartbeatMs: this.options.heartbeatMs,
        ackWaitMs: this.deps.broker.ackWaitMs,
        maxAckPending: this.window.maxAckPending,
        ...(deprecation ? { deprecation } : {}),
      }),
    );
    this.heartbeat = setInterval(() => this.checkAlive(), this.options.heartbeatMs);
    this.heartbeat.unref();
    this.deps.group.wake();
  }

  /** Ends the session and leaves the group: what it held goes back to the agent's other sockets. */
  stop(code?: number, reason?: string): Promise<void> {
    this.ended ??= this.end(code, reason);
    return this.ended;
  }

  private async end(code: number | undefined, reason: string | undefined): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeat);
    this.settleRetries.close();
    if (code !== undefined && this.ws.readyState === WebSocket.OPEN) this.framing.end(this.ws, code, reason);
    this.deps.backlog.release();
    this.window.stop();
    // Presence first: the socket is gone now, whatever giving back its deliveries takes.
    if (this.joined) await this.deps.presence.disconnected(this.agentId).catch(() => undefined);
    await this.deps.group.leave(this).catch(() => undefined);
    this.onEnd();
  }

  get canTake(): boolean {
    if (this.stopped || !this.joined || this.ws.readyState !== WebSocket.OPEN || !this.window.hasRoom)
      return false;
    if (!this.deps.backlog.full) return true;
    this.pauseUntilDrained();
    return false;
  }

  /** Stores the agent's decision on a delivered message. */
  private async settle(frame: SettleFrame): Promise<void> {
    if (frame.type === "acknowledge") await this.deps.broker.ack(this.agentId, frame);
    else await this.deps.broker.reject(this.agentId, frame, frame.reason);
    this.deps.metrics.count(
      frame.type === "acknowledge"
        ? "acp_messages_acknowledged_total"
        : "acp_messages_rejected_by_recipient_total",
    );
  }

  /** A recipient that does not read: nothing more for it until its buffer drains (counted once per pause). */
  private pauseUntilDrained(): void {
    if (this.paused) return;
    this.paused = true;
    this.deps.metrics.count("acp_ws_deliveries_paused_total");
    void this.deps.backlog.untilDrained().then(() => {
      this.paused = false;
      this.deps.group.wake();
    });
  }

  /** Sends one delivery: the queue's within the window; routed ones whatever the window says. */
  deliver(delivery: Delivery): boolean {
    if (this.stopped || this.ws.readyState !== WebSocket.OPEN) return false;
    corkUntilNextTurn(this.ws);
    this.ws.send(this.framing.delivery(delivery));
    if (delivery.route) this.routedOut.set(refKey(delivery), { from: delivery.from, id: delivery.id });
    else this.window.sent(delivery);
    this.deps.backlog.sent();
    this.deps.metrics.count("acp_messages_delivered_total");
    return true;
  }

  settled(message: MessageRef): void {
    this.routedOut.delete(refKey(message));
    this.window.settled(message);
  }

  forget(message: MessageRef): void {
    this.routedOut.delete(refKey(message));
    this.window.forget(message);
  }

  handedOut(): { queue: MessageRef[]; routed: MessageRef[] } {
    return { queue: this.window.held(), routed: [...this.routedOut.values()] };
  }

  private checkAlive(): void {
    if (Date.now() - this.lastSeen > this.options.heartbeatMs * 3) {
      this.ws.terminate();
      void this.stop();
      return;
    }
    this.ws.ping();
  }

  /** The agent is there (a pong, a Phoenix heartbeat): the heartbeat check starts over. */
  alive(): void {
    this.lastSeen = Date.now();
  }

  /** A native frame from the agent: handled, and answered when it needs an answer. */
  receive(data: RawData, isBinary: boolean): void {
    this.lastSeen = Date.now();
    const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer).byteLength;
    let frame: ClientFrame;
    let raw: unknown;
    try {
      if (isBinary) throw new AcpError("InvalidRequest", "frames must be JSON text");
      raw = JSON.parse(data.toString());
      if (isPlainAck(raw)) {
        // The most frequent frame: its shape is checked by hand, without the schema's overhead.
        void this.handle(raw, size).then((answer) => answer && this.send(answer));
        return;
      }
      const parsed = ClientFrame.safeParse(raw);
      if (!parsed.success) {
        throw new AcpError("InvalidRequest", "unknown or malformed frame", {
          problems: problemsOf(parsed.error),
        });
      }
      frame = parsed.data;
    } catch (err) {
      const error =
        err instanceof SyntaxError ? new AcpError("ParseError", "the frame is not valid JSON") : err;
      // A malformed `submit` still gets its answer by ref, so the sender is not left waiting.
      const ref = (raw as { ref?: unknown } | null | undefined)?.ref;
      const echo = (typeof ref === "string" && ref.length <= 256) || Number.isFinite(ref);
      this.send({
        type: "error",
        ...(echo ? { ref: ref as string | number } : {}),
        error: toErrorObject(error),
      });
      return;
    }
    void this.handle(frame, size).then((answer) => answer && this.send(answer));
  }

  /**
   * Acts on one frame of the agent's; returns the answer it needs (`submitted`, or an error frame),
   * if any: the native protocol sends it as it is, Phoenix Channels as the push's reply.
   */
  async handle(frame: ClientFrame, size: number): Promise<ServerFrame | undefined> {
    // Stopped (its key rotated, its agent revoked, replaced): nothing more is taken from it.
    if (this.stopped) return undefined;
    this.lastSeen = Date.now();
    switch (frame.type) {
      case "submit":
        this.deps.intake.begin(this.ws);
        try {
          const result = await this.deps.relay.submit(this.agent, frame.envelope, size, {
            ...(frame.priority !== undefined && { priority: frame.priority }),
            replyTo: this.route,
          });
          return { type: "submitted", ref: frame.ref, ...result };
        } catch (err) {
          return { type: "error", ref: frame.ref, error: toErrorObject(brokerToAcp(err)) };
        } finally {
          this.deps.intake.end();
        }
      case "acknowledge":
      case "reject":
        this.deps.group.settled(frame);
        try {
          await this.settle(frame);
        } catch (err) {
          // Told either way (the SDK counts it as the gateway's trouble); tried again if it passes.
          this.settleRetries.retry(frame, err);
          return { type: "error", id: frame.id, from: frame.from, error: toErrorObject(brokerToAcp(err)) };
        }
        return undefined;
      case "working":
        try {
          await this.deps.broker.working(this.agentId, frame);
          this.window.working(frame);
        } catch (err) {
          return { type: "error", id: frame.id, from: frame.from, error: toErrorObject(brokerToAcp(err)) };
        }
        return undefined;
      case "flow":
        if (frame.maxAckPending > this.options.maxInFlight) {
          return { type: "error", error: toErrorObject(invalidWindow(this.options.maxInFlight)) };
        }
        this.window.resize(frame.maxAckPending);
        return undefined;
      case "presence":
        await this.deps.presence.update(this.agentId, frame.presence).catch(() => undefined);
        return undefined;
      case "heartbeat":
        await this.deps.presence.heartbeat(this.agentId).catch(() => undefined);
        return undefined;
      case "auth":
        return undefined;
    }
  }

  /** Answers (`submitted`, errors) of one turn leave together with that turn's deliveries. */
  private send(frame: ServerFrame): void {
    const text = this.framing.answer(frame);
    if (text !== undefined) this.sendText(text);
  }

  private sendText(text: string): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    corkUntilNextTurn(this.ws);
    this.ws.send(text);
  }
}

/** Built by concatenation: the stored envelope text is embedded as is, never re-parsed. */
function deliveryFrame(d: Delivery): string {
  return `{"type":"new_message","id":${JSON.stringify(d.id)},"from":${JSON.stringify(d.from)},"kind":"${d.kind}","method":${JSON.stringify(d.method)},"attempt":${d.attempt},"priority":"${d.priority}","envelope":${d.envelope}}`;
}

/** An `acknowledge` of exactly `{type, id, from}`, the most frequent frame, checked without the schema. */
export function isPlainAck(raw: unknown): raw is { type: "acknowledge"; id: string; from: string } {
  if (typeof raw !== "object" || raw === null) return false;
  const frame = raw as Record<string, unknown>;
  return (
    frame.type === "acknowledge" &&
    typeof frame.id === "string" &&
    frame.id.length > 0 &&
    typeof frame.from === "string" &&
    Object.keys(frame).length === 3
  );
}

/** A window that is not a whole number from 1 to what the gateway hands out to one agent at a time. */
export function invalidWindow(limit: number): AcpError {
  return new AcpError("InvalidParams", `maxAckPending must be an integer from 1 to ${limit}`, {
    problems: [{ path: "/maxAckPending", message: `must be an integer from 1 to ${limit}` }],
  });
}
