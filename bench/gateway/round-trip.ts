/**
 * The round trip between two agents through the gateway, one message in flight: the requester signs
 * a request and submits it on its WebSocket; the gateway verifies, persists and delivers it to the
 * responder, which acknowledges it, signs a response and submits that on its own WebSocket; the
 * gateway verifies, persists and delivers the response back, and the requester acknowledges it.
 * Latency = request submitted → response received. Like the other bench agents, neither side checks
 * the signature of what it receives (the gateway does); each signs what it sends.
 */
import type WebSocket from "ws";
import type { ServerFrame } from "../../src/gateway/index.js";
import { buildResponse, signMessage } from "../../src/protocol/index.js";
import { type BenchAgent, openSocket, signedRequest } from "./acp-agents.js";

const ROUND_TRIP_TIMEOUT_MS = 30_000;

type Delivery = Extract<ServerFrame, { type: "new_message" }>;

/** Both ends on one gateway's WebSockets; `roundTrip()` resolves with the latency in ms. */
export class RoundTripPair {
  private nextRef = 0;
  private waiting: { id: string; resolve: (at: number) => void; reject: (err: Error) => void } | undefined;

  private constructor(
    private readonly requester: BenchAgent,
    private readonly responder: BenchAgent,
    private readonly requesterWs: WebSocket,
    private readonly responderWs: WebSocket,
    private readonly body: Record<string, unknown>,
  ) {
    requesterWs.on("message", (data) => this.onRequesterFrame(data.toString()));
    responderWs.on("message", (data) => this.onResponderFrame(data.toString()));
  }

  static async connect(
    wsUrl: string,
    requester: BenchAgent,
    responder: BenchAgent,
    body: Record<string, unknown>,
  ): Promise<RoundTripPair> {
    const [a, b] = await Promise.all([
      openSocket(wsUrl, requester.apiKey),
      openSocket(wsUrl, responder.apiKey),
    ]);
    return new RoundTripPair(requester, responder, a, b, body);
  }

  roundTrip(): Promise<number> {
    if (this.waiting) return Promise.reject(new Error("one round trip at a time"));
    const { id, text } = signedRequest(this.requester, this.responder.sender.agentId, this.body);
    const started = performance.now();
    return new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => this.fail(new Error(`no response to ${id} within ${ROUND_TRIP_TIMEOUT_MS} ms`)),
        ROUND_TRIP_TIMEOUT_MS,
      );
      this.waiting = {
        id,
        resolve: (at) => {
          clearTimeout(timer);
          resolve(at - started);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.submit(this.requesterWs, text);
    });
  }

  close(): void {
    this.requesterWs.close();
    this.responderWs.close();
  }

  private submit(ws: WebSocket, envelopeText: string): void {
    ws.send(`{"type":"submit","ref":${this.nextRef++},"envelope":${envelopeText}}`);
  }

  private fail(err: Error): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(err);
  }

  /** The requester gets `submitted` for its request, then the response as a `new_message`. */
  private onRequesterFrame(text: string): void {
    const receivedAt = performance.now();
    const frame = JSON.parse(text) as ServerFrame;
    if (frame.type === "error") {
      this.fail(new Error(`requester got an error: ${frame.error.message}`));
      return;
    }
    if (frame.type !== "new_message") return;
    ack(this.requesterWs, frame);
    const answered = (frame.envelope as { id?: unknown }).id;
    if (frame.kind === "response" && this.waiting && answered === this.waiting.id) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.resolve(receivedAt);
    }
  }

  /** The responder acknowledges each request and answers it with a signed response. */
  private onResponderFrame(text: string): void {
    const frame = JSON.parse(text) as ServerFrame;
    if (frame.type === "error") {
      this.fail(new Error(`responder got an error: ${frame.error.message}`));
      return;
    }
    if (frame.type !== "new_message") return;
    ack(this.responderWs, frame);
    if (frame.method !== "agent.request") return; // the handshake's messages need no answer
    const request = frame.envelope as unknown as Parameters<typeof buildResponse>[1];
    const response = signMessage(
      buildResponse(this.responder.sender, request, { ok: true }),
      this.responder.signer,
    );
    this.submit(this.responderWs, JSON.stringify(response));
  }
}

function ack(ws: WebSocket, frame: Delivery): void {
  ws.send(`{"type":"acknowledge","id":${JSON.stringify(frame.id)},"from":${JSON.stringify(frame.from)}}`);
}
