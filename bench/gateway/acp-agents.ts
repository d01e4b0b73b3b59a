/**
 * The two ACP agents the gateway benchmark drives: a sender that signs every message in the timed
 * loop and submits it (WebSocket `submit` frame or HTTP POST), and a recipient that takes each
 * `new_message` frame off its WebSocket and acknowledges it. Both talk to the gateway's wire
 * contract directly (no SDK) so the client process spends as little CPU as possible.
 */
import WebSocket from "ws";
import type { ServerFrame } from "../../src/gateway/index.js";
import {
  buildAnnounce,
  buildCapabilities,
  buildRequest,
  createSigner,
  generateIdentity,
  newMessageId,
  publicIdentity,
  type SenderIdentity,
  type Signer,
  signMessage,
} from "../../src/protocol/index.js";
import type { HttpPoster } from "./http-post.js";
import { ADMIN_TOKEN } from "./processes.js";

/** A message that is neither delivered nor refused within this long means the gateway lost it. */
const DELIVERY_TIMEOUT_MS = 30_000;

export interface BenchAgent {
  sender: SenderIdentity;
  signer: Signer;
  apiKey: string;
}

/** A set-up request unanswered this long fails the run, naming it, instead of hanging it. */
const SETUP_REQUEST_TIMEOUT_MS = 30_000;

export async function registerAgent(gatewayUrl: string, agentId: string): Promise<BenchAgent> {
  const identity = generateIdentity(agentId, `principal-of-${agentId}`);
  const res = await fetch(`${gatewayUrl}/api/v1/agents`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(publicIdentity(identity)),
    signal: AbortSignal.timeout(SETUP_REQUEST_TIMEOUT_MS),
  }).catch((error: Error) => {
    throw new Error(`registering ${agentId}: ${error.message}`);
  });
  if (res.status !== 201) throw new Error(`registering ${agentId}: HTTP ${res.status} ${await res.text()}`);
  const { apiKey } = (await res.json()) as { apiKey: string };
  return {
    sender: { agentId, principalId: identity.principalId, layers: [0, 1, 2] },
    signer: createSigner(identity),
    apiKey,
  };
}

/** The four-step handshake through the gateway: announce both ways, then capabilities both ways. */
export async function handshake(gatewayUrl: string, a: BenchAgent, b: BenchAgent): Promise<void> {
  const caps = { tools: ["bench"], domains: ["benchmark"], limits: [], requests: [] };
  const steps = [
    [a, b, buildAnnounce(a.sender, b.sender.agentId, { capabilities: ["bench"], purpose: "benchmark" })],
    [b, a, buildAnnounce(b.sender, a.sender.agentId, { capabilities: ["bench"], purpose: "benchmark" })],
    [a, b, buildCapabilities(a.sender, b.sender.agentId, caps)],
    [b, a, buildCapabilities(b.sender, a.sender.agentId, caps)],
  ] as const;
  for (const [from, , message] of steps) {
    const res = await fetch(`${gatewayUrl}/api/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": from.apiKey, "content-type": "application/json" },
      body: JSON.stringify(signMessage(message, from.signer)),
      signal: AbortSignal.timeout(SETUP_REQUEST_TIMEOUT_MS),
    });
    if (res.status !== 202)
      throw new Error(`handshake step ${message.method}: HTTP ${res.status} ${await res.text()}`);
  }
}

/**
 * A request body padded so the signed envelope is about `targetBytes` on the wire (the protocol
 * benchmark uses 1 KB too), built once; each message still gets its own id, timestamp and signature.
 */
export function requestBody(from: BenchAgent, to: string, targetBytes: number): Record<string, unknown> {
  const body = {
    action: "get-availability",
    parameters: { date_range: "2026-02-17/2026-02-21", duration_minutes: 60 },
    note: "",
  };
  const size = Buffer.byteLength(
    JSON.stringify(signMessage(buildRequest(from.sender, to, body), from.signer)),
  );
  body.note = "x".repeat(Math.max(0, targetBytes - size));
  return body;
}

/** Signs a fresh request; returns its wire text and message-id (which the gateway uses as the id). */
export function signedRequest(
  from: BenchAgent,
  to: string,
  body: Record<string, unknown>,
): { id: string; text: string } {
  const id = newMessageId();
  return {
    id,
    text: JSON.stringify(signMessage(buildRequest(from.sender, to, body, { messageId: id }), from.signer)),
  };
}

/**
 * An agent's WebSocket, resolved once the gateway has sent `ready`. `onFrame` gets every frame after
 * `ready` from the start: deliveries queued for the agent can arrive in the same read as `ready`, and
 * ws emits all of a read's frames at once, before a listener added after this resolves could see them.
 */
export function openSocket(
  wsUrl: string,
  apiKey: string,
  onFrame?: (text: string, ws: WebSocket) => void,
): Promise<WebSocket> {
  const ws = new WebSocket(wsUrl, { headers: { "x-api-key": apiKey }, perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    let ready = false;
    ws.once("error", reject);
    ws.on("message", (data) => {
      const text = data.toString();
      if (ready) {
        onFrame?.(text, ws);
        return;
      }
      const frame = JSON.parse(text) as ServerFrame;
      if (frame.type === "ready") {
        ready = true;
        ws.off("error", reject);
        resolve(ws);
      } else if (frame.type === "error") {
        reject(new Error(`WebSocket refused: ${frame.error.message}`));
      }
    });
  });
}

interface Waiter {
  resolve: (receivedAt: number) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/** The recipient: resolves `expect(id)` when that message arrives, and acknowledges every delivery. */
export class Recipient {
  private readonly waiters = new Map<string, Waiter>();
  acknowledged = 0;
  /** Deliveries nobody was waiting for (the handshake's, or a redelivery). */
  unexpected = 0;

  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data) => this.onFrame(data.toString()));
    ws.on("close", () => {
      for (const [id, waiter] of this.waiters)
        waiter.reject(new Error(`recipient socket closed while waiting for ${id}`));
    });
  }

  static async connect(wsUrl: string, agent: BenchAgent): Promise<Recipient> {
    return new Recipient(await openSocket(wsUrl, agent.apiKey));
  }

  /** Call before submitting, so a delivery that beats the submit answer is not missed. */
  expect(id: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(id);
        reject(new Error(`message ${id} was not delivered within ${DELIVERY_TIMEOUT_MS} ms`));
      }, DELIVERY_TIMEOUT_MS);
      this.waiters.set(id, { resolve, reject, timer });
    });
  }

  /** Stop waiting for a message whose submission failed. */
  forget(id: string): void {
    const waiter = this.waiters.get(id);
    if (waiter) clearTimeout(waiter.timer);
    this.waiters.delete(id);
  }

  private onFrame(text: string): void {
    const receivedAt = performance.now();
    const frame = JSON.parse(text) as ServerFrame;
    if (frame.type === "error") {
      // An acknowledgement the gateway refused: the run is not measuring what it claims to.
      for (const waiter of this.waiters.values())
        waiter.reject(new Error(`recipient got an error frame: ${frame.error.message}`));
      return;
    }
    if (frame.type !== "new_message") return;
    this.ws.send(
      `{"type":"acknowledge","id":${JSON.stringify(frame.id)},"from":${JSON.stringify(frame.from)}}`,
    );
    this.acknowledged++;
    const waiter = this.waiters.get(frame.id);
    if (!waiter) {
      this.unexpected++;
      return;
    }
    this.waiters.delete(frame.id);
    clearTimeout(waiter.timer);
    waiter.resolve(receivedAt);
  }

  close(): void {
    this.ws.close();
  }
}

/** The sender's WebSocket: `submit` frames answered by `submitted` (or `error`) with the same ref. */
export class SocketSubmitter {
  private nextRef = 0;
  private readonly pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();

  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as ServerFrame;
      if (frame.type === "submitted" || frame.type === "error") {
        const entry = typeof frame.ref === "number" ? this.pending.get(frame.ref) : undefined;
        if (!entry) return;
        this.pending.delete(frame.ref as number);
        if (frame.type === "submitted") entry.resolve();
        else entry.reject(new Error(`submit refused: ${frame.error.code} ${frame.error.message}`));
      } else if (frame.type === "new_message") {
        ws.send(
          `{"type":"acknowledge","id":${JSON.stringify(frame.id)},"from":${JSON.stringify(frame.from)}}`,
        ); // the handshake's replies
      }
    });
    ws.on("close", () => {
      for (const entry of this.pending.values()) entry.reject(new Error("sender socket closed"));
    });
  }

  static async connect(wsUrl: string, agent: BenchAgent): Promise<SocketSubmitter> {
    return new SocketSubmitter(await openSocket(wsUrl, agent.apiKey));
  }

  /** `envelopeText` is spliced in as is: it was just serialised, no need to parse and re-serialise. */
  submit(envelopeText: string): Promise<void> {
    const ref = this.nextRef++;
    return new Promise((resolve, reject) => {
      this.pending.set(ref, { resolve, reject });
      this.ws.send(`{"type":"submit","ref":${ref},"envelope":${envelopeText}}`);
    });
  }

  close(): void {
    this.ws.close();
  }
}

export async function httpSubmit(poster: HttpPoster, apiKey: string, envelopeText: string): Promise<void> {
  const res = await poster.post("/api/v1/messages", envelopeText, { "x-api-key": apiKey });
  if (res.status !== 202) throw new Error(`POST /api/v1/messages: HTTP ${res.status} ${res.text}`);
}

/** The gateway's own count of acknowledgements it processed (Prometheus text from GET /metrics). */
export async function acknowledgedByGateway(gatewayUrl: string): Promise<number> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("acp_messages_acknowledged_total"));
  return line ? Number(line.split(" ").pop()) : 0;
}
