/**
 * Attack: recipients that authenticate and then never read their sockets, while large messages
 * queue for them. The gateway must not hold what they do not read: each socket stops getting
 * deliveries once its send buffer passes a bound, all of them together stay under the gateway-wide
 * cap (the `acp_ws_outbound_buffered_bytes` metric), the rest stays queued in the broker, and a
 * normal agent keeps getting its messages. This replays the embedded broker, whose inbox hands a
 * delivery out only when the socket takes it; the NATS inbox pulls ahead up to the agent's
 * in-flight window whether or not the socket takes them (docs/gateway.md, "Slow readers").
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { buildNotification } from "../../src/protocol/index.js";
import { handshake, receive, submit } from "../helpers/messaging.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

const SOCKET_LIMIT = 256 * 1024;
const GATEWAY_LIMIT = 300 * 1024;
const BODY_BYTES = 200 * 1024;
const NON_READERS = 3;
/** Far more than the kernel's socket buffers on loopback take (a few MB per connection). */
const MESSAGES_EACH = 50;

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(" ").at(-1)) : Number.NaN;
}

/** Authenticates, waits for `ready`, then stops reading: the TCP socket is paused for good. */
async function connectNonReader(wsUrl: string, apiKey: string): Promise<WebSocket> {
  const ws = new WebSocket(wsUrl, { headers: { "x-api-key": apiKey } });
  await new Promise<void>((resolve, reject) => {
    ws.once("message", () => resolve());
    ws.once("error", reject);
  });
  ws.pause();
  return ws;
}

/** Polls the gateway-wide metric while the attack runs and keeps the highest value seen. */
class BufferedBytesSampler {
  highest = 0;
  private running = true;
  private readonly loop: Promise<void>;

  constructor(private readonly url: string) {
    this.loop = (async () => {
      while (this.running) {
        this.highest = Math.max(this.highest, await metric(url, "acp_ws_outbound_buffered_bytes"));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    this.highest = Math.max(this.highest, await metric(this.url, "acp_ws_outbound_buffered_bytes"));
  }
}

/** Queues MESSAGES_EACH large notifications to each stuck agent, then lets the gateway settle. */
async function flood(gw: TestGateway, sender: TestAgent, stuck: TestAgent[]): Promise<string[]> {
  const padding = "x".repeat(BODY_BYTES);
  const last: string[] = [];
  for (let round = 0; round < MESSAGES_EACH; round++) {
    for (const agent of stuck) {
      const note = buildNotification(sender.sender, agent.sender.agentId, { round, padding });
      const accepted = await submit(gw, sender, note);
      expect(accepted.status, JSON.stringify(accepted.json)).toBe(202);
      if (round === MESSAGES_EACH - 1) last.push(note.params.headers["message-id"] as string);
    }
  }
  // Each stuck socket has stopped being fed: past that, the gateway pushes nothing more into it.
  await until(
    () => metric(gw.url, "acp_ws_deliveries_paused_total"),
    (paused) => paused >= stuck.length,
    "every stuck socket is paused",
    30_000,
  );
  return last;
}

describe("a recipient that never reads its socket", () => {
  let gw: TestGateway;
  let sender: TestAgent;
  let normal: TestAgent;
  const sockets: WebSocket[] = [];
  beforeEach(async () => {
    gw = await startTestGateway({
      limits: { socketBufferBytes: SOCKET_LIMIT, outboundBufferBytes: GATEWAY_LIMIT },
    });
    sender = await gw.register("agent-flooder");
    normal = await gw.register("agent-normal");
    await handshake(gw, sender, normal);
  });
  afterEach(async () => {
    for (const ws of sockets.splice(0)) ws.terminate();
    await gw.close();
  });

  it("holds at most the bounds in the gateway, leaves the rest queued, and others keep receiving", async () => {
    const stuck: TestAgent[] = [];
    for (let i = 0; i < NON_READERS; i++) {
      const agent = await gw.register(`agent-stuck-${i}`);
      await handshake(gw, sender, agent);
      sockets.push(await connectNonReader(gw.gateway.wsUrl, agent.apiKey));
      stuck.push(agent);
    }
    const normalSocket = await FrameClient.connect(gw.gateway.wsUrl, normal.apiKey);
    await normalSocket.next("ready");
    await receive(normalSocket, 2); // the handshake's announce and capabilities

    const buffered = new BufferedBytesSampler(gw.url);
    let lastIds: string[];
    try {
      lastIds = await flood(gw, sender, stuck);
    } finally {
      await buffered.stop();
    }
    const frameBytes = BODY_BYTES + 4096;
    // Each socket holds at most its bound plus the one frame that crossed it, and all together at
    // most the gateway's bound plus one frame per socket.
    expect(buffered.highest).toBeGreaterThan(0);
    expect(buffered.highest).toBeLessThanOrEqual(
      Math.min(GATEWAY_LIMIT, NON_READERS * SOCKET_LIMIT) + NON_READERS * frameBytes,
    );
    // The stuck sockets stopped being fed: their backlog is in the broker, not in the gateway.
    expect(await metric(gw.url, "acp_ws_deliveries_paused_total")).toBeGreaterThanOrEqual(NON_READERS);
    const delivered = await metric(gw.url, "acp_messages_delivered_total");
    expect(delivered).toBeLessThan(NON_READERS * MESSAGES_EACH);
    for (const id of lastIds) {
      const status = await api(gw.url, `/api/v1/messages/${id}/status`, { apiKey: sender.apiKey });
      expect(status.json.status, "never handed to a socket that does not read").toBe("queued");
    }

    // A normal agent still gets its messages, promptly and in order.
    const notes = Array.from({ length: 5 }, (_, i) =>
      buildNotification(sender.sender, "agent-normal", { i }),
    );
    for (const note of notes) expect((await submit(gw, sender, note)).status).toBe(202);
    expect(await receive(normalSocket, notes.length)).toEqual(
      notes.map((n) => n.params.headers["message-id"]),
    );
    expect(await metric(gw.url, "acp_ws_outbound_buffered_bytes")).toBeLessThanOrEqual(buffered.highest);

    // Closing the stuck sockets releases what they held; the gateway is healthy.
    for (const ws of sockets.splice(0)) ws.terminate();
    await until(
      () => metric(gw.url, "acp_ws_outbound_buffered_bytes"),
      (bytes) => bytes === 0,
      "released",
    );
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    await normalSocket.close();
  }, 120_000);
});
