import WebSocket from "ws";
import { AcpError } from "../protocol/index.js";
import {
  type ClientFrame,
  CONSUME_PARAM,
  MAX_ACK_PENDING_PARAM,
  type ServerFrame,
  type SubmitResponse,
  WS_PATH,
} from "../wire/api.js";
import {
  type AgentConnection,
  type ConnectionEvents,
  type DeliveredRef,
  deliveredKey,
  type ReconnectOptions,
} from "./connection.js";
import { errorFromObject, GatewayUnreachableError } from "./errors.js";
import { isGatewayTrouble } from "./health.js";
import { websocketUrl } from "./http.js";
import { backoffDelay, Outbox, type SubmitOptions, type SubmitRetryOptions } from "./outbox.js";

/** The gateway refuses a connection with this code when the agent has as many as it takes. */
const CLOSE_TOO_MANY = 4409;
/** …and with this one when the API key is refused (wrong, rotated or revoked). */
const CLOSE_UNAUTHORIZED = 4401;

/**
 * One agent's WebSocket to the gateway: authenticates, receives `new_message` frames, submits
 * envelopes (`submit` → `submitted`/`error`, correlated by `ref`), sends acks and heartbeats, and
 * reconnects with exponential backoff and jitter until closed. Submissions made while the socket is
 * down wait and go out on the next connection; which ones are sent again, and when, is the
 * Outbox's business (outbox.ts).
 */
export class GatewayConnection implements AgentConnection {
  private ws: WebSocket | undefined;
  private ready = false;
  private closed = false;
  private everConnected = false;
  private attempt = 0;
  private readonly outbox: Outbox;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private lastHeard = 0;
  /**
   * Deliveries the agent said it is working on and has not settled yet. The gateway refuses
   * `working` for a message that is not out at that moment (given back by a reconnect, and not
   * redelivered yet): that is not news, the redelivery is. By `deliveredKey`.
   */
  private readonly workingOn = new Set<string>();
  /** The caller of connect(), until the first attempt succeeds or fails. */
  private firstAttempt: { resolve(): void; reject(err: Error): void } | undefined;

  constructor(
    private readonly options: {
      baseUrl: string;
      apiKey: string;
      agentId: string;
      reconnect?: ReconnectOptions;
      submitRetry?: SubmitRetryOptions;
      /** The socket's window: unacknowledged deliveries the gateway may send it (MAX_ACK_PENDING_PARAM). */
      maxAckPending?: number;
      /** "replies": this socket takes only what is routed to it (CONSUME_PARAM). */
      consume?: "all" | "replies";
      events: ConnectionEvents;
    },
  ) {
    this.outbox = new Outbox(options.submitRetry, {
      send: (ref, envelope) => this.ready && this.send({ type: "submit", ref, envelope }),
      resubmitting: (info, refusal) => {
        options.events.resubmit(info);
        if (refusal?.kind === "StorageUnavailable") options.events.degraded(refusal);
      },
    });
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** Opens the socket; resolves on the gateway's `ready`, rejects if this first attempt fails. */
  connect(): Promise<void> {
    if (this.closed) return Promise.reject(new AcpError("Cancelled", "this connection was closed"));
    return new Promise((resolve, reject) => {
      this.firstAttempt = { resolve, reject };
      this.open(this.firstAttempt);
    });
  }

  /** Resolves with the gateway's acceptance (`duplicate: true` when a resend found it stored already). */
  submit(envelope: Record<string, unknown>, options: SubmitOptions): Promise<SubmitResponse> {
    if (this.closed) return Promise.reject(new AcpError("Cancelled", "the agent is closed"));
    return this.outbox.submit(envelope, options);
  }

  /** False when the socket is down: the gateway will redeliver the message and it is acked then. */
  acknowledge(message: DeliveredRef): boolean {
    this.workingOn.delete(deliveredKey(message));
    return this.ready && this.send({ type: "acknowledge", id: message.id, from: message.from });
  }

  reject(message: DeliveredRef, reason: string): boolean {
    this.workingOn.delete(deliveredKey(message));
    const { id, from } = message;
    return this.ready && this.send({ type: "reject", id, from, reason: reason.slice(0, 1000) || "rejected" });
  }

  working(message: DeliveredRef): boolean {
    this.workingOn.add(deliveredKey(message));
    return this.ready && this.send({ type: "working", id: message.id, from: message.from });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.stopHeartbeat();
    this.outbox.failAll(
      new AcpError("Cancelled", "the agent closed before the gateway accepted the message"),
    );
    this.firstAttempt?.reject(new AcpError("Cancelled", "the agent was closed while connecting"));
    const ws = this.ws;
    this.ws = undefined;
    this.ready = false;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => ws.terminate(), 2_000);
      ws.once("close", () => {
        clearTimeout(force);
        resolve();
      });
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1000, "agent closing");
    });
  }

  private open(first?: { resolve(): void; reject(err: Error): void }): void {
    const url = new URL(websocketUrl(this.options.baseUrl, WS_PATH));
    if (this.options.maxAckPending !== undefined)
      url.searchParams.set(MAX_ACK_PENDING_PARAM, String(this.options.maxAckPending));
    if (this.options.consume === "replies") url.searchParams.set(CONSUME_PARAM, "replies");
    const ws = new WebSocket(url, {
      headers: { "x-api-key": this.options.apiKey },
      handshakeTimeout: 10_000,
    });
    this.ws = ws;
    let failure: Error | undefined;
    ws.on("unexpected-response", (_req, res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () => {
        failure = upgradeRefused(res.statusCode ?? 0, text);
        ws.terminate();
      });
    });
    ws.on("error", (err) => {
      failure ??= new GatewayUnreachableError(this.options.baseUrl, err);
    });
    const heard = () => {
      this.lastHeard = Date.now();
    };
    ws.on("pong", heard);
    ws.on("ping", heard);
    ws.on("message", (data) => {
      this.lastHeard = Date.now();
      const frame = parseFrame(data.toString());
      if (frame?.type === "ready") {
        if (frame.agentId !== this.options.agentId) {
          failure = new AcpError(
            "Forbidden",
            `the API key belongs to ${frame.agentId}, not to ${this.options.agentId}`,
          );
          ws.close(1008, "wrong agent");
          return;
        }
        this.onReady(frame, first);
        first = undefined;
        this.firstAttempt = undefined;
      } else if (frame?.type === "error" && !this.ready) {
        failure = errorFromObject(frame.error); // e.g. the key was refused; the close follows
      } else if (frame) {
        this.onFrame(frame);
      }
    });
    ws.on("close", (code, reason) => {
      if (this.ws !== ws) return;
      const wasReady = this.ready;
      this.ready = false;
      this.ws = undefined;
      this.stopHeartbeat();
      this.outbox.connectionLost();
      if (first) {
        this.firstAttempt = undefined;
        first.reject(failure ?? new AcpError("Unauthorized", `the gateway closed the connection (${code})`));
        return;
      }
      if (this.closed) return;
      if (code === CLOSE_UNAUTHORIZED) {
        failure ??= new AcpError("Unauthorized", "the gateway no longer accepts this agent's API key");
      }
      // A refused key will not become valid by retrying: stop and say why. Too many connections of
      // this agent (4409) may change as others close: say so, and keep trying.
      const fatal =
        code !== CLOSE_TOO_MANY &&
        failure instanceof AcpError &&
        ["Unauthorized", "Forbidden"].includes(failure.kind);
      if (fatal || (code === CLOSE_TOO_MANY && failure)) this.options.events.error(failure as Error);
      if (wasReady || fatal) {
        this.options.events.disconnected({ code, reason: reason.toString(), willReconnect: !fatal });
      }
      if (!fatal) {
        this.scheduleReconnect();
        return;
      }
      this.closed = true;
      this.outbox.failAll(failure as AcpError);
    });
  }

  private onReady(
    frame: Extract<ServerFrame, { type: "ready" }>,
    first: { resolve(): void } | undefined,
  ): void {
    this.ready = true;
    this.attempt = 0;
    this.startHeartbeat(frame.heartbeatMs);
    this.outbox.connectionReady();
    this.options.events.connected({
      gateway: frame.gateway,
      heartbeatMs: frame.heartbeatMs,
      ackWaitMs: frame.ackWaitMs,
      reconnected: this.everConnected,
      ...(frame.deprecation ? { deprecation: frame.deprecation } : {}),
    });
    this.everConnected = true;
    first?.resolve();
  }

  private onFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case "new_message":
        this.gatewayWorked();
        this.options.events.message(frame);
        return;
      case "submitted":
        this.outbox.accepted(Number(frame.ref), {
          id: frame.id,
          status: frame.status,
          duplicate: frame.duplicate,
        });
        this.gatewayWorked();
        return;
      case "error": {
        const err = errorFromObject(frame.error, frame.id ? { messageId: frame.id } : {});
        const ref = frame.ref === undefined ? undefined : Number(frame.ref);
        // An answer to a submission already settled (its caller's deadline passed) is not news.
        if (ref !== undefined && this.outbox.issued(ref)) this.outbox.refused(ref, err);
        else if (frame.id !== undefined && isGatewayTrouble(err)) {
          // An ack, reject or working the broker did not take: the redelivery repairs it.
          this.options.events.degraded(err);
        } else if (
          frame.id === undefined ||
          !this.workingOn.has(deliveredKey({ id: frame.id, from: frame.from ?? "" }))
        )
          this.options.events.error(err);
        return;
      }
      default:
        return;
    }
  }

  /** The gateway did its part; it counts as working again once no submission waits to be sent again. */
  private gatewayWorked(): void {
    if (!this.outbox.retrying) this.options.events.succeeded();
  }

  private send(frame: ClientFrame): boolean {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(frame));
    return true;
  }

  private scheduleReconnect(): void {
    const { initialDelayMs = 250, maxDelayMs = 10_000 } = this.options.reconnect ?? {};
    const delay = backoffDelay(this.attempt, initialDelayMs, maxDelayMs);
    this.attempt++;
    this.reconnectTimer = setTimeout(() => {
      if (!this.closed) this.open();
    }, delay);
  }

  /** Heartbeats keep presence "online"; a gateway silent for three periods is presumed gone. */
  private startHeartbeat(periodMs: number): void {
    this.stopHeartbeat();
    this.lastHeard = Date.now();
    const period = Math.max(100, periodMs);
    this.heartbeatTimer = setInterval(() => {
      const ws = this.ws;
      if (!ws || ws.readyState !== WebSocket.OPEN) return;
      if (Date.now() - this.lastHeard > 3 * period) {
        ws.terminate();
        return;
      }
      this.send({ type: "heartbeat" });
      ws.ping();
    }, period);
    this.heartbeatTimer.unref();
  }

  private stopHeartbeat(): void {
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }
}

function parseFrame(text: string): ServerFrame | undefined {
  try {
    const frame = JSON.parse(text) as ServerFrame;
    return typeof frame === "object" && frame !== null && typeof frame.type === "string" ? frame : undefined;
  } catch {
    return undefined;
  }
}

/** The gateway refused the upgrade (bad key, revoked agent …): its JSON-RPC error, or the status. */
function upgradeRefused(status: number, body: string): Error {
  try {
    const error = (JSON.parse(body) as { error?: { code: number; message: string; data?: unknown } }).error;
    if (error && typeof error.code === "number") return errorFromObject(error, { httpStatus: status });
  } catch {
    // not JSON: fall through to a status-based error
  }
  const reason = status === 401 ? "Unauthorized" : status === 403 ? "Forbidden" : "InternalError";
  return new AcpError(reason, `the gateway refused the WebSocket upgrade (HTTP ${status})`, {
    httpStatus: status,
  });
}
