/**
 * The scale benchmark's agents: many registered agents in pairs, each pair handshaken through the
 * gateway, each agent on its own WebSocket (to one of several gateways), each sending to its peer
 * at a steady rate. Every agent acknowledges what it receives; the fleet records the delivery
 * latency (submit sent → `new_message` received by the peer) of the messages sent while measuring.
 */
import { randomUUID } from "node:crypto";
import type WebSocket from "ws";
import type { ServerFrame } from "../../src/gateway/index.js";
import { buildRequest, signMessage } from "../../src/protocol/index.js";
import { type BenchAgent, handshake, openSocket, registerAgent } from "../gateway/acp-agents.js";

/** Runs `task` over `items` with at most `limit` at a time. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await task(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export const fleetAgentId = (index: number) => `agent-s${String(index).padStart(5, "0")}`;

export async function registerFleet(gatewayUrl: string, count: number): Promise<BenchAgent[]> {
  const agents = new Array<BenchAgent>(count);
  const ids = Array.from({ length: count }, (_, i) => fleetAgentId(i));
  await forEachLimited(ids, 16, async (id, i) => {
    agents[i] = await registerAgent(gatewayUrl, id);
  });
  return agents;
}

/** Agent 2k and 2k+1 are peers. */
export const peerOf = (index: number) => (index % 2 === 0 ? index + 1 : index - 1);

export async function handshakePairs(gatewayUrl: string, agents: BenchAgent[]): Promise<void> {
  const pairs = Array.from({ length: Math.floor(agents.length / 2) }, (_, k) => k);
  await forEachLimited(pairs, 16, (k) => handshake(gatewayUrl, agents[2 * k]!, agents[2 * k + 1]!));
}

/** How many of an agent's submits may wait for their answer before it skips a beat (a backlogged gateway). */
const MAX_UNANSWERED = 8;

export class Fleet {
  private readonly sockets: WebSocket[] = [];
  private readonly unanswered: number[];
  /** Sent while measuring, not delivered yet: message-id → send time. */
  private readonly inFlight = new Map<string, number>();
  private readonly latencies: number[] = [];
  private measuring = false;
  /** Deliveries per agent since connecting (the handshake's included). */
  readonly received: number[];
  sent = 0;
  skipped = 0;
  errors = 0;
  lastError = "";

  private constructor(
    private readonly agents: BenchAgent[],
    private readonly bodies: Record<string, unknown>,
  ) {
    this.unanswered = agents.map(() => 0);
    this.received = agents.map(() => 0);
  }

  /** Connects agent i to `wsUrls[i % wsUrls.length]` (so with two gateways, every pair spans both). */
  static async connect(
    agents: BenchAgent[],
    wsUrls: string[],
    body: Record<string, unknown>,
  ): Promise<Fleet> {
    const fleet = new Fleet(agents, body);
    await forEachLimited(agents, 64, async (agent, i) => {
      // The handler is in place before `ready`: the handshake's deliveries may come with it.
      fleet.sockets[i] = await openSocket(wsUrls[i % wsUrls.length]!, agent.apiKey, (text, ws) =>
        fleet.onFrame(i, ws, text),
      );
    });
    return fleet;
  }

  get measured(): number {
    return this.latencies.length;
  }

  get undelivered(): number {
    return this.inFlight.size;
  }

  /** Agent `index` signs a fresh request to its peer and submits it, unless too many wait for an answer. */
  send(index: number): void {
    if (this.unanswered[index]! >= MAX_UNANSWERED) {
      this.skipped++;
      return;
    }
    const agent = this.agents[index]!;
    const to = this.agents[peerOf(index)]!.sender.agentId;
    const id = randomUUID();
    const text = JSON.stringify(
      signMessage(buildRequest(agent.sender, to, this.bodies, { messageId: id }), agent.signer),
    );
    if (this.measuring) this.inFlight.set(id, performance.now());
    this.unanswered[index]!++;
    this.sent++;
    this.sockets[index]!.send(`{"type":"submit","ref":0,"envelope":${text}}`);
  }

  startMeasuring(): void {
    this.measuring = true;
  }

  stopMeasuring(): void {
    this.measuring = false;
  }

  /** Delivery latencies (ms) of the messages sent while measuring, sorted. */
  sortedLatencies(): Float64Array {
    return Float64Array.from(this.latencies).sort();
  }

  close(): void {
    for (const ws of this.sockets) ws.close();
  }

  private onFrame(index: number, ws: WebSocket, text: string): void {
    const receivedAt = performance.now();
    const frame = JSON.parse(text) as ServerFrame;
    if (frame.type === "submitted") {
      this.unanswered[index]!--;
    } else if (frame.type === "error") {
      if (frame.ref !== undefined) this.unanswered[index]!--;
      this.errors++;
      this.lastError = `${frame.error.code} ${frame.error.message}`;
    } else if (frame.type === "new_message") {
      ws.send(`{"type":"acknowledge","id":${JSON.stringify(frame.id)},"from":${JSON.stringify(frame.from)}}`);
      this.received[index]!++;
      const sentAt = this.inFlight.get(frame.id);
      if (sentAt !== undefined) {
        this.inFlight.delete(frame.id);
        this.latencies.push(receivedAt - sentAt);
      }
    }
  }
}
