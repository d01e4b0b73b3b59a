/**
 * Attacks on the routing of answers to the socket that asked (docs/gateway.md, "Several sockets
 * per agent"), replayed against a real gateway on each broker (the routes live in memory on the
 * embedded broker, in the status records and a NATS subject on NATS):
 * - a third agent answers another pair's request (a response whose JSON-RPC id is that request's
 *   message id) to reach the socket waiting for the answer, or to take the answer's place: it goes
 *   to the agent's queue like any other message, and the real answer still reaches the asker;
 * - one agent opens sockets past the per-agent limit: refused (-32017 naming the limit, close 4409),
 *   its sockets within the limit keep receiving, and the gateway serves others;
 * - a socket asks to consume something else than `all` or `replies`: refused, naming `/consume`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification, buildRequest, buildResponse, signMessage } from "../../src/protocol/index.js";
import { handshake, receive, submit } from "../helpers/messaging.js";
import { api, FrameClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";

type Start = (options?: Record<string, unknown>) => Promise<TestGateway>;

function attacks(start: Start): void {
  let gw: TestGateway | undefined;
  const sockets: FrameClient[] = [];
  afterEach(async () => {
    for (const ws of sockets.splice(0)) await ws.close();
    await gw?.close();
    gw = undefined;
  });
  const open = async (g: TestGateway, apiKey: string, query = "") => {
    const ws = await FrameClient.connect(`${g.gateway.wsUrl}${query}`, apiKey);
    sockets.push(ws);
    await ws.next("ready");
    return ws;
  };

  it("a third agent's answer to another pair's request reaches the queue, not the asking socket", async () => {
    gw = await start();
    const alice = await gw.register("agent-alice");
    const bob = await gw.register("agent-bob");
    const mallory = await gw.register("agent-mallory");
    await handshake(gw, alice, bob);
    await handshake(gw, mallory, bob);
    const receiving = await open(gw, bob.apiKey);
    await receive(receiving, 4); // both handshakes' messages
    const asking = await open(gw, bob.apiKey, "?consume=replies");
    const aliceSocket = await open(gw, alice.apiKey);
    await receive(aliceSocket, 2);
    const request = buildRequest(bob.sender, "agent-alice", { q: "price" });
    asking.send({ type: "submit", ref: 1, envelope: signMessage(request, bob.signer) });
    await asking.next("submitted", (f) => f.ref === 1);
    // Mallory answers alice's request herself, with its id, before alice does.
    const forged = buildResponse(mallory.sender, request, { price: 0 });
    expect((await submit(gw, mallory, forged)).status).toBe(202);
    const queued = await receiving.next("new_message");
    expect(queued).toMatchObject({ id: forged.result.headers["message-id"], from: "agent-mallory" });
    receiving.send({ type: "acknowledge", id: queued.id, from: queued.from });
    // Alice's real answer still reaches the socket that asked, and only it.
    const asked = await aliceSocket.next("new_message", (f) => f.method === "agent.request");
    aliceSocket.send({ type: "acknowledge", id: asked.id, from: asked.from });
    const answer = buildResponse(alice.sender, request, { price: 42 });
    expect((await submit(gw, alice, answer)).status).toBe(202);
    const answered = await asking.next("new_message");
    expect(answered).toMatchObject({ id: answer.result.headers["message-id"], from: "agent-alice" });
    expect(asking.pending().filter((f) => f.type === "new_message")).toEqual([]);
    asking.send({ type: "acknowledge", id: answered.id, from: answered.from });
    // The gateway is healthy: a new note reaches the receiving socket.
    const note = buildNotification(alice.sender, "agent-bob", { after: true });
    expect((await submit(gw, alice, note)).status).toBe(202);
    expect((await receiving.next("new_message")).id).toBe(note.params.headers["message-id"]);
  });

  it("refuses sockets past the per-agent limit; the agent's others and other agents carry on", async () => {
    gw = await start({ limits: { maxSocketsPerAgent: 3 } });
    const alice = await gw.register("agent-alice");
    const bob = await gw.register("agent-bob");
    await handshake(gw, alice, bob);
    const kept = [await open(gw, bob.apiKey), await open(gw, bob.apiKey), await open(gw, bob.apiKey)];
    for (let n = 0; n < 5; n++) {
      const extra = await FrameClient.connect(gw.gateway.wsUrl, bob.apiKey);
      sockets.push(extra);
      expect((await extra.next("error")).error).toMatchObject({ code: -32017, data: { limit: 3 } });
      await expect(extra.next("ready")).rejects.toThrow(/4409/);
    }
    const note = buildNotification(alice.sender, "agent-bob", { still: "served" });
    expect((await submit(gw, alice, note)).status).toBe(202);
    const id = note.params.headers["message-id"];
    const got = await Promise.any(
      kept.map((ws) => ws.next("new_message", (f) => f.id === id, 10_000).then(() => ws)),
    );
    expect(got).toBeDefined();
    const aliceSocket = await open(gw, alice.apiKey);
    expect((await aliceSocket.next("new_message")).method).toBe("agent.announce");
    expect((await api(gw.url, "/healthz")).status).toBe(200);
  });

  it("refuses a socket asking to consume anything but all or replies, naming the parameter", async () => {
    gw = await start();
    const bob = await gw.register("agent-bob");
    const ws = await FrameClient.connect(`${gw.gateway.wsUrl}?consume=everything`, bob.apiKey);
    sockets.push(ws);
    const refused = await ws.next("error");
    expect(refused.error).toMatchObject({ code: -32602, data: { problems: [{ path: "/consume" }] } });
    await expect(ws.next("ready")).rejects.toThrow(/1008/);
    await open(gw, bob.apiKey); // the agent still connects
  });
}

describe("several sockets per agent: attacks, embedded broker", () => {
  attacks((options) => startTestGateway(options));
});

describeWithNats("several sockets per agent: attacks, NATS", () => {
  const nats = useNatsServer();
  attacks(async (options) => startTestGateway({ ...options, natsUrl: (await nats()).url }));
});
