/**
 * The soak's traffic: senders submitting signed notifications at a steady rate (open loop: the
 * schedule does not wait for answers, up to a cap of messages in flight), and recipients on raw
 * WebSockets that acknowledge every delivery. Half the recipients stay connected (their latency is
 * what the report shows); the other half keep disconnecting and reconnecting (their messages wait
 * in the offline queue, so they count for loss, not for latency).
 */
import { randomUUID } from "node:crypto";
import WebSocket from "ws";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import type { BenchAgent } from "../gateway/acp-agents.js";
import type { HttpPoster } from "../gateway/http-post.js";

/** Messages submitted and not answered yet, at most; beyond it the schedule falls behind (reported). */
const MAX_IN_FLIGHT = 256;

export interface Delivery {
  latencyMs: number;
  steady: boolean;
}

/** One recipient agent's WebSocket; `churn()` disconnects and reconnects it on a random rhythm. */
export class SoakRecipient {
  private ws: WebSocket | undefined;
  private stopped = false;
  reconnects = 0;

  constructor(
    private readonly wsUrl: string,
    readonly agent: BenchAgent,
    readonly steady: boolean,
    private readonly onDelivery: (id: string, sentAt: number, steady: boolean) => void,
  ) {}

  get connected(): boolean {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  connect(): Promise<void> {
    const ws = new WebSocket(this.wsUrl, { headers: { "x-api-key": this.agent.apiKey } });
    this.ws = ws;
    ws.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as {
        type: string;
        id?: string;
        from?: string;
        envelope?: { params?: { body?: { sentAt?: number } } };
      };
      if (frame.type !== "new_message" || !frame.id) return;
      ws.send(`{"type":"acknowledge","id":${JSON.stringify(frame.id)},"from":${JSON.stringify(frame.from)}}`);
      this.onDelivery(frame.id, frame.envelope?.params?.body?.sentAt ?? Number.NaN, this.steady);
    });
    ws.on("error", () => undefined);
    return new Promise((resolve, reject) => {
      ws.once("message", () => resolve()); // `ready`
      ws.once("close", (code) => reject(new Error(`${this.agent.sender.agentId} closed with ${code}`)));
    });
  }

  disconnect(): Promise<void> {
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      ws.once("close", () => resolve());
      ws.close();
    });
  }

  /** Connected 5–15 s, away 1–3 s, until `stop()`. */
  async churn(): Promise<void> {
    while (!this.stopped) {
      await sleep(5_000 + Math.random() * 10_000);
      if (this.stopped) break;
      await this.disconnect();
      await sleep(1_000 + Math.random() * 2_000);
      if (this.stopped) break;
      await this.connect().catch(() => undefined);
      this.reconnects++;
    }
  }

  /** Ends the churn and makes sure it is connected, so its queue drains. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (!this.connected) await this.connect();
  }
}

export interface SenderStats {
  submitted: number;
  acknowledged: Map<string, number>;
  refused: Map<string, number>;
  /** Ticks when the in-flight cap held messages back: the gateway could not keep up. */
  behindSchedule: number;
}

/** Submits `rate` messages per second round-robin over the pairs until `stop()`; open loop. */
export class SteadySender {
  readonly stats: SenderStats = {
    submitted: 0,
    acknowledged: new Map(),
    refused: new Map(),
    behindSchedule: 0,
  };
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly poster: HttpPoster,
    private readonly pairs: Array<{ from: BenchAgent; to: SoakRecipient }>,
    private readonly rate: number,
  ) {}

  start(): void {
    const started = Date.now();
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - started) / 1000) * this.rate) - this.stats.submitted;
      for (let i = 0; i < due; i++) {
        if (this.inFlight >= MAX_IN_FLIGHT) {
          this.stats.behindSchedule++;
          return;
        }
        this.submitOne(this.stats.submitted++);
      }
    }, 10);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
  }

  private submitOne(n: number): void {
    const pair = this.pairs[n % this.pairs.length] as { from: BenchAgent; to: SoakRecipient };
    const id = randomUUID();
    const envelope = signMessage(
      buildNotification(
        pair.from.sender,
        pair.to.agent.sender.agentId,
        { sentAt: Date.now(), n },
        { messageId: id },
      ),
      pair.from.signer,
    );
    this.inFlight++;
    const done = this.poster
      .post("/api/v1/messages", JSON.stringify(envelope), { "x-api-key": pair.from.apiKey })
      .then(
        ({ status }) => {
          if (status === 202) this.stats.acknowledged.set(id, n % this.pairs.length);
          else bump(this.stats.refused, String(status));
        },
        () => bump(this.stats.refused, "network"),
      )
      .finally(() => {
        this.inFlight--;
        this.pending.delete(done);
      });
    this.pending.add(done);
  }
}

function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
