/**
 * Deliveries on their way to a socket when its gateway is `kill -9`ed: the socket died with the
 * gateway, so they must go out again as soon as the recipient reconnects, not when their ack wait
 * ends. The ack wait here is 10 minutes, so only that mechanism can deliver them within the test;
 * the assertions are on the redelivered frames and their attempt numbers, not on timings.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  buildAnnounce,
  buildCapabilities,
  buildNotification,
  signMessage,
} from "../../src/protocol/index.js";
import { receive } from "../helpers/messaging.js";
import { api, FrameClient, registerTestAgent, type TestAgent } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { type GatewayChild, spawnGateway } from "./support/processes.js";

const TEN_MINUTES = 10 * 60_000;
const CAPS = { tools: [], domains: ["test"], limits: [], requests: [] };

async function relay(url: string, from: TestAgent, message: object): Promise<void> {
  const res = await api(url, "/api/v1/messages", {
    apiKey: from.apiKey,
    body: signMessage(message, from.signer),
  });
  if (res.status !== 202) throw new Error(`submit: ${res.status} ${JSON.stringify(res.json)}`);
}

/** The four-step handshake through the gateway, as raw envelopes. */
async function handshake(url: string, a: TestAgent, b: TestAgent): Promise<void> {
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    await relay(url, x, buildAnnounce(x.sender, y.sender.agentId, { capabilities: [], purpose: "test" }));
  }
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    await relay(url, x, buildCapabilities(x.sender, y.sender.agentId, CAPS));
  }
}

/** Registers both agents, handshakes, and connects the recipient (its handshake messages acknowledged). */
async function setUp(url: string, wsUrl: string) {
  const sender = await registerTestAgent(url, "agent-sender", "principal-sender");
  const recipient = await registerTestAgent(url, "agent-recipient", "principal-recipient");
  await handshake(url, sender, recipient);
  const socket = await FrameClient.connect(wsUrl, recipient.apiKey);
  await socket.next("ready");
  await receive(socket, 2);
  return { sender, recipient, socket };
}

/** Sends `count` notifications and takes their deliveries without acknowledging them. */
async function leaveInFlight(url: string, sender: TestAgent, socket: FrameClient, count: number) {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const note = buildNotification(sender.sender, "agent-recipient", { i });
    await relay(url, sender, note);
    ids.push(note.params.headers["message-id"] as string);
  }
  for (const id of ids) {
    expect((await socket.next("new_message", (f) => f.id === id)).attempt).toBe(1);
    // Reading the status also makes the gateway record the delivery, which it otherwise batches.
    const status = await api(url, `/api/v1/messages/${id}/status`, { apiKey: sender.apiKey });
    expect(status.json.status).toBe("delivered");
  }
  return ids;
}

/**
 * The reconnected socket gets them again, in order, counted as a closed connection counts them (the
 * oldest as an attempt, the others as they were), and acknowledges them.
 */
async function expectRedelivered(socket: FrameClient, ids: string[], url: string, sender: TestAgent) {
  const redelivered = [];
  for (let i = 0; i < ids.length; i++) redelivered.push(await socket.next("new_message"));
  expect(redelivered.map((f) => [f.id, f.attempt])).toEqual(ids.map((id, i) => [id, i === 0 ? 2 : 1]));
  for (const frame of redelivered) socket.send({ type: "acknowledge", id: frame.id, from: frame.from });
  await expect
    .poll(async () => {
      const status = await api(url, `/api/v1/messages/${ids.at(-1)}/status`, { apiKey: sender.apiKey });
      return status.json.status;
    })
    .toBe("acknowledged");
}

describe("deliveries orphaned by a gateway's death", () => {
  const tmp = useTmpDir("acp-rel-orphans-");
  const gateways: GatewayChild[] = [];
  afterEach(async () => {
    for (const gateway of gateways.splice(0)) await gateway.kill();
  });

  it("embedded: the restarted gateway sends them at once, the oldest counted as an attempt", async () => {
    const launch = { data: tmp(), delivery: { ackWaitMs: TEN_MINUTES } };
    const first = await spawnGateway({ launch });
    gateways.push(first);
    const { sender, recipient, socket } = await setUp(first.url, first.wsUrl);
    const ids = await leaveInFlight(first.url, sender, socket, 3);

    await first.kill();
    const second = await spawnGateway({ launch, port: first.port });
    gateways.push(second);
    const again = await FrameClient.connect(second.wsUrl, recipient.apiKey);
    await again.next("ready");
    await expectRedelivered(again, ids, second.url, sender);
    await again.close();
  }, 120_000);
});

describeWithNats("deliveries orphaned by a gateway's death (NATS)", () => {
  const startNats = useNatsServer();
  const tmp = useTmpDir("acp-rel-orphans-nats-");
  const gateways: GatewayChild[] = [];
  afterEach(async () => {
    for (const gateway of gateways.splice(0)) await gateway.kill();
  });

  it("another gateway on the same NATS sends them as soon as the recipient reconnects there", async () => {
    const nats = await startNats();
    const launch = () => ({ data: tmp(), nats: { servers: nats.url }, delivery: { ackWaitMs: TEN_MINUTES } });
    const doomed = await spawnGateway({ launch: launch() });
    const survivor = await spawnGateway({ launch: launch() });
    gateways.push(doomed, survivor);
    const { sender, recipient, socket } = await setUp(doomed.url, doomed.wsUrl);
    const ids = await leaveInFlight(doomed.url, sender, socket, 3);

    await doomed.kill();
    const again = await FrameClient.connect(survivor.wsUrl, recipient.apiKey);
    await again.next("ready");
    await expectRedelivered(again, ids, survivor.url, sender);
    await again.close();
  }, 120_000);
});
