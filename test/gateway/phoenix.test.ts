/**
 * The messaging platform's real-time delivery, Phoenix Channels, tested with Phoenix's own
 * JavaScript client (`phoenix`, unmodified): an agent joins `messages:{agent_id}` on
 * `/socket/websocket` and gets the same inbox as on the native socket, in the same order, with the
 * same acknowledgement, rejection and redelivery.
 */
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";
import { usePhoenixAgents } from "./phoenix-client.js";
import { handshake } from "../helpers/messaging.js";

let gw: TestGateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});
const connect = usePhoenixAgents();

async function notify(
  gateway: TestGateway,
  from: TestAgent,
  to: string,
  body: Record<string, unknown>,
  priority?: string,
) {
  const res = await api(gateway.url, `/api/v1/messages${priority ? `?priority=${priority}` : ""}`, {
    apiKey: from.apiKey,
    body: signMessage(buildNotification(from.sender, to, body), from.signer),
  });
  expect(res.status, JSON.stringify(res.json)).toBe(202);
  return res.json.id as string;
}

const status = async (gateway: TestGateway, agent: TestAgent, id: string) =>
  (await api(gateway.url, `/api/v1/messages/${id}/status`, { apiKey: agent.apiKey })).json;

describe("Phoenix Channels at /socket/websocket, with the phoenix npm client", () => {
  it("delivers the agent's inbox to its channel, by priority, and takes acknowledgements and rejections", async () => {
    gw = await startTestGateway();
    const alice = await gw.register("alice");
    const bob = await gw.register("bob");
    await handshake(gw, alice, bob);
    // Queued while bob is offline: the platform's offline queue.
    const low = await notify(gw, alice, "bob", { n: 1 }, "low");
    const urgent = await notify(gw, alice, "bob", { n: 2 }, "critical");
    const normal = await notify(gw, alice, "bob", { n: 3 }, "normal");

    const phoenix = connect(gw, "messages:bob", { params: { api_key: bob.apiKey } });
    const joined = await phoenix.join();
    expect(joined).toEqual({
      status: "ok",
      response: expect.objectContaining({
        agent_id: "bob",
        max_ack_pending: 256,
        ack_wait_ms: expect.any(Number),
      }),
    });
    const received = await until(
      () => phoenix.messages,
      (m) => m.filter((x) => x.method === "agent.notification").length === 3,
      "bob's channel gets the three notifications",
    );
    const notifications = received.filter((m) => m.method === "agent.notification");
    expect(notifications.map((m) => [m.id, m.priority])).toEqual([
      [urgent, "critical"],
      [normal, "medium"],
      [low, "low"],
    ]);
    // The signed envelope exactly as alice submitted it, for bob to verify end to end.
    expect(notifications[0]).toMatchObject({
      from: "alice",
      kind: "notification",
      attempt: 1,
      envelope: { method: "agent.notification", params: { body: { n: 2 } }, signature: expect.any(String) },
    });

    for (const m of received.filter((x) => x.method !== "agent.notification")) {
      expect(await phoenix.push("acknowledge", { id: m.id })).toEqual({ status: "ok", response: {} });
    }
    expect(await phoenix.push("acknowledge", { id: urgent })).toEqual({ status: "ok", response: {} });
    expect(await phoenix.push("reject", { id: normal, reason: "not now" })).toEqual({
      status: "ok",
      response: {},
    });
    expect(await status(gw, alice, urgent)).toMatchObject({ status: "acknowledged" });
    expect(await status(gw, alice, normal)).toMatchObject({
      status: "failed",
      dead_letter: { reason: "rejected", detail: "rejected by recipient: not now" },
    });

    // A message sent while the channel is joined arrives at once.
    const live = await notify(gw, alice, "bob", { n: 4 }, "high");
    await until(
      () => phoenix.messages,
      (m) => m.some((x) => x.id === live),
      "the live message reaches the channel",
    );
    // An id alone names the message while it is unambiguous (ids are per sender, and the
    // platform names messages by id); a message nobody delivered needs its sender, and is unknown.
    const neverDelivered = "0190c6d4-0000-7000-8000-000000000000";
    const anonymous = await phoenix.push("acknowledge", { id: neverDelivered });
    expect(anonymous).toMatchObject({
      status: "error",
      response: { code: -32602, data: { problems: [{ path: "/from" }] } },
    });
    const unknown = await phoenix.push("acknowledge", { id: neverDelivered, from: "alice" });
    expect(unknown).toMatchObject({ status: "error", response: { code: -32016 } });
    const noId = await phoenix.push("reject", { reason: "x" });
    expect(noId).toMatchObject({ status: "error", response: { code: -32602 } });
    expect((noId.response.data as { problems: { path: string }[] }).problems).toContainEqual(
      expect.objectContaining({ path: "/id" }),
    );
  });

  it("asks for the sender when two senders' messages delivered on the socket share an id", async () => {
    gw = await startTestGateway();
    const alice = await gw.register("alice");
    const carol = await gw.register("carol");
    const bob = await gw.register("bob");
    await handshake(gw, alice, bob);
    await handshake(gw, carol, bob);
    const phoenix = connect(gw, "messages:bob", { params: { api_key: bob.apiKey } });
    expect((await phoenix.join()).status).toBe("ok");
    const shared = "0190c6d4-1111-7000-8000-000000000001";
    for (const sender of [alice, carol]) {
      const res = await api(gw.url, "/api/v1/messages", {
        apiKey: sender.apiKey,
        body: signMessage(
          buildNotification(sender.sender, "bob", { n: 1 }, { messageId: shared }),
          sender.signer,
        ),
      });
      expect(res.status, JSON.stringify(res.json)).toBe(202);
    }
    await until(
      () => phoenix.messages,
      (m) => m.filter((x) => x.id === shared).length === 2,
      "both senders' messages reach the channel",
    );
    // An id alone could be either message: refused, naming `from`, and nothing is settled.
    expect(await phoenix.push("acknowledge", { id: shared })).toMatchObject({
      status: "error",
      response: { code: -32602, data: { problems: [{ path: "/from" }] } },
    });
    expect(await status(gw, alice, shared)).toMatchObject({ status: "delivered" });
    expect(await status(gw, carol, shared)).toMatchObject({ status: "delivered" });
    expect(await phoenix.push("acknowledge", { id: shared, from: "alice" })).toEqual({
      status: "ok",
      response: {},
    });
    expect(await status(gw, alice, shared)).toMatchObject({ status: "acknowledged" });
    expect(await status(gw, carol, shared)).toMatchObject({ status: "delivered" });
    expect(await phoenix.push("reject", { id: shared, from: "carol", reason: "no" })).toEqual({
      status: "ok",
      response: {},
    });
    expect(await status(gw, carol, shared)).toMatchObject({ status: "failed" });
  });

  it("gives back what was not acknowledged when the channel is left, and delivers it on the next join", async () => {
    gw = await startTestGateway();
    const alice = await gw.register("alice");
    const bob = await gw.register("bob");
    await handshake(gw, alice, bob);
    const first = connect(gw, "messages:bob", { params: { api_key: bob.apiKey } });
    await first.join();
    const pending = await notify(gw, alice, "bob", { n: 1 });
    await until(
      () => first.messages,
      (m) => m.some((x) => x.id === pending),
      "delivered once",
    );
    const left = await new Promise<string>((resolve) => {
      first.channel.leave().receive("ok", () => resolve("ok"));
    });
    expect(left).toBe("ok");
    expect(await status(gw, alice, pending)).toMatchObject({ status: "delivered" });

    // Another client (the same agent's API key, an authToken this time) joins: the message again.
    const second = connect(gw, "messages:bob", { authToken: bob.apiKey });
    expect((await second.join()).status).toBe("ok");
    const again = await until(
      () => second.messages,
      (m) => m.some((x) => x.id === pending),
      "redelivered to the next join",
    );
    expect(again.find((x) => x.id === pending)?.attempt).toBeGreaterThanOrEqual(1);
    expect(await second.push("acknowledge", { id: pending })).toEqual({ status: "ok", response: {} });
  });

  it("shares the agent's queue with its native socket: each message to one of them, the channel stays", async () => {
    gw = await startTestGateway();
    const alice = await gw.register("alice");
    const bob = await gw.register("bob");
    await handshake(gw, alice, bob);
    const phoenix = connect(gw, "messages:bob", {
      params: { api_key: bob.apiKey },
      heartbeatIntervalMs: 100,
      joinParams: { max_ack_pending: 1 },
    });
    const heartbeatReplies: unknown[] = [];
    phoenix.socket.onMessage((message: object) => {
      const { topic, event } = message as { topic: string; event: string };
      if (topic === "phoenix" && event === "phx_reply") heartbeatReplies.push(message);
    });
    expect((await phoenix.join()).status).toBe("ok");
    // Phoenix's heartbeats are answered: the client keeps the socket (it closes it on a missed reply).
    await until(
      () => heartbeatReplies,
      (replies) => replies.length >= 3,
      "three heartbeats answered",
    );
    const native = await FrameClient.connect(`${gw.gateway.wsUrl}?maxAckPending=1`, bob.apiKey);
    await native.next("ready");
    // The handshake's two messages and four notes: each goes to one of the two, in turn as they ack.
    const sent: string[] = [];
    for (let n = 1; n <= 4; n++) sent.push(await notify(gw, alice, "bob", { n }));
    const viaNative: string[] = [];
    const acked = new Set<string>();
    await until(
      async () => {
        for (const m of phoenix.messages) {
          if (acked.has(`${m.from}/${m.id}`)) continue;
          acked.add(`${m.from}/${m.id}`);
          await phoenix.push("acknowledge", { id: m.id, from: m.from });
        }
        for (const frame of native.pending()) {
          if (frame.type !== "new_message") continue;
          const m = await native.next("new_message", (f) => f.id === frame.id);
          viaNative.push(m.id);
          native.send({ type: "acknowledge", id: m.id, from: m.from });
        }
        return phoenix.messages.length + viaNative.length;
      },
      (count) => count >= 6,
      "six messages taken between the channel and the native socket",
    );
    const viaChannel = phoenix.messages.map((m) => m.id);
    expect(viaChannel.length).toBeGreaterThan(0);
    expect(viaNative.length).toBeGreaterThan(0);
    expect(viaChannel.filter((id) => viaNative.includes(id))).toEqual([]); // none to both
    expect([...viaChannel, ...viaNative].filter((id) => sent.includes(id)).sort()).toEqual([...sent].sort());
    // The channel was not closed for the native socket: both are the agent's consumers.
    expect(phoenix.events).not.toContain("phx_close");
    expect(phoenix.socket.isConnected()).toBe(true);
    native.close();
  });
});
