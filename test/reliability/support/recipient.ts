/**
 * The receiving application of a fault test: a real SDK `AcpAgent` (end-to-end verification,
 * reconnects, duplicate suppression by message id) whose notification handler counts every
 * message it is handed. A count above 1 for an id is a duplicate reaching the application.
 */
import { resolvePolicy } from "../../../src/broker/policy.js";
import { AcpAgent } from "../../../src/client/index.js";
import { buildNotification, signMessage } from "../../../src/protocol/index.js";
import { api, FrameClient, registerTestAgent, type TestAgent } from "../../helpers/gateway.js";
import { sleep } from "./processes.js";

export class CountingRecipient {
  /** Message id → times the application's handler ran for it. */
  readonly deliveries = new Map<string, number>();
  /** Gateway connections made after the first (the SDK reconnecting). */
  reconnects = 0;
  /** The id of the gateway process the agent is connected to now (from its `ready` frame). */
  gateway = "";
  readonly errors: string[] = [];

  private constructor(
    readonly agent: AcpAgent,
    private readonly agentId: string,
  ) {}

  static async connect(url: string, who: TestAgent): Promise<CountingRecipient> {
    const agent = new AcpAgent({
      gateway: url,
      identity: who.identity,
      apiKey: who.apiKey,
      layers: who.sender.layers,
      audit: false,
      state: false,
      reconnect: { initialDelayMs: 100, maxDelayMs: 1_000 },
    });
    const recipient = new CountingRecipient(agent, who.sender.agentId);
    agent.onNotification((_body, ctx) => {
      recipient.deliveries.set(ctx.messageId, (recipient.deliveries.get(ctx.messageId) ?? 0) + 1);
    });
    agent.on("connected", (info) => {
      recipient.gateway = info.gateway;
      if (info.reconnected) recipient.reconnects++;
    });
    agent.on("error", (err) => {
      if (recipient.errors.length < 20) recipient.errors.push(err.message);
    });
    await agent.connect();
    return recipient;
  }

  /** Waits until every id was delivered, or `timeoutMs`; returns how many are still missing. */
  async waitFor(ids: Iterable<string>, timeoutMs: number): Promise<number> {
    const wanted = [...ids];
    const until = Date.now() + timeoutMs;
    for (;;) {
      const missing = wanted.filter((id) => !this.deliveries.has(id)).length;
      if (missing === 0 || Date.now() >= until) return missing;
      await sleep(100);
    }
  }

  /**
   * The positive barrier before "no duplicate reached the application", once the gateway's view is
   * settled (nothing left to redeliver): `from` sends a later notification through `url`, and this
   * waits until the application has it. What the gateway handed out before reaches the socket
   * first, so a duplicate the SDK let through has been counted by then. The later message is not
   * kept among `deliveries`.
   */
  async handledAfterSettled(url: string, from: TestAgent): Promise<void> {
    const later = signMessage(buildNotification(from.sender, this.agentId, { barrier: true }), from.signer);
    const id = later.params.headers["message-id"] as string;
    const accepted = await api(url, "/api/v1/messages", { apiKey: from.apiKey, body: later });
    if (accepted.status !== 202)
      throw new Error(`the later message was refused: ${JSON.stringify(accepted.json)}`);
    if ((await this.waitFor([id], 30_000)) > 0)
      throw new Error("the later message did not arrive within 30 s");
    this.deliveries.delete(id);
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/**
 * Registers a sender and a recipient, connects the recipient's SDK agent and completes the
 * four-step handshake with an SDK agent for the sender (closed afterwards: the stream signs raw
 * envelopes with the same identity and layers, which the gateway and the recipient accept).
 */
export async function pairAgents(
  url: string,
  ids: { sender: string; recipient: string },
): Promise<{ sender: TestAgent; recipientAgent: TestAgent; recipient: CountingRecipient }> {
  const sender = await registerTestAgent(url, ids.sender, `principal-of-${ids.sender}`);
  const recipientAgent = await registerTestAgent(url, ids.recipient, `principal-of-${ids.recipient}`);
  const recipient = await CountingRecipient.connect(url, recipientAgent);
  const handshaker = new AcpAgent({
    gateway: url,
    identity: sender.identity,
    apiKey: sender.apiKey,
    layers: sender.sender.layers,
    audit: false,
    state: false,
  });
  await handshaker.connect();
  await handshaker.handshake(ids.recipient, { timeoutMs: 30_000 });
  await handshaker.close();
  return { sender, recipientAgent, recipient };
}

/**
 * The gateway's own view once the dust settled: how many of the recipient's messages it redelivered
 * at least once, and how many are not acknowledged yet (GET /api/v1/messages, all pages).
 */
export async function gatewayView(
  url: string,
  recipient: TestAgent,
): Promise<{ records: number; redelivered: number; unsettled: number; unsettledItems: string[] }> {
  let cursor: string | null = null;
  /** The first few unsettled records, as listed: what a failing assertion shows. */
  const unsettledItems: string[] = [];
  let records = 0;
  let redelivered = 0;
  let unsettled = 0;
  for (let page = 0; page < 1_000; page++) {
    const query = `to_agent_id=${recipient.sender.agentId}&type=notification&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const res = await fetch(`${url}/api/v1/messages?${query}`, {
      headers: { "x-api-key": recipient.apiKey },
    });
    if (res.status !== 200) throw new Error(`listing messages: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as {
      items: Array<{ status: string; retryCount: number; method: string }>;
      nextCursor: string | null;
    };
    for (const item of body.items) {
      if (item.method !== "agent.notification") continue;
      records++;
      if (item.retryCount > 0) redelivered++;
      if (item.status === "queued" || item.status === "delivered") {
        unsettled++;
        if (unsettledItems.length < 5) unsettledItems.push(JSON.stringify(item).slice(0, 600));
      }
    }
    cursor = body.nextCursor;
    if (!cursor) break;
  }
  return { records, redelivered, unsettled, unsettledItems };
}

/** The id a gateway process announces in its `ready` frame (a WebSocket as `agent`, closed again). */
export async function gatewayIdOf(wsUrl: string, agent: TestAgent): Promise<string> {
  const ws = await FrameClient.connect(wsUrl, agent.apiKey);
  const ready = await ws.next("ready");
  await ws.close();
  return ready.gateway;
}

/** The gateway's default ack wait (`delivery.ackWaitMs`), which the reliability gateways keep. */
const ACK_WAIT_MS = resolvePolicy({}).ackWaitMs;

/**
 * The gateway's view once every acknowledgement has landed. A message handed out just before a fault
 * and not acknowledged to the gateway that died is redelivered only when its ack wait ends, up to
 * one ack wait after the fault: so with `faultAt` this waits until then (and 5 s more) for the view to
 * settle; without it, up to 10 s for stragglers. A fast run used to look before those redeliveries.
 */
export async function settledGatewayView(url: string, recipient: TestAgent, faultAt?: number) {
  const deadline = Math.max(Date.now() + 10_000, (faultAt ?? 0) + ACK_WAIT_MS + 5_000);
  let view = await gatewayView(url, recipient);
  while (view.unsettled > 0 && Date.now() < deadline) {
    await sleep(200);
    view = await gatewayView(url, recipient);
  }
  return view;
}
