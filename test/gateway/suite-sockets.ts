import { afterEach, beforeEach, expect, it } from "vitest";
import type { ServerFrame } from "../../src/gateway/index.js";
import {
  buildAnnounce,
  buildCapabilities,
  buildErrorResponse,
  buildHandoff,
  buildNotification,
  buildRequest,
  buildResponse,
  signMessage,
} from "../../src/protocol/index.js";
import { api, FrameClient, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { deliveredBefore, handshake, receive, submit } from "../helpers/messaging.js";
import { until } from "../helpers/until.js";

type NewMessage = Extract<ServerFrame, { type: "new_message" }>;

/** Two gateways on one store: the same gateway twice on the embedded broker, two on one NATS. */
export interface GatewayPair {
  a: TestGateway;
  b: TestGateway;
  close(): Promise<void>;
}

async function socket(gw: TestGateway, agent: TestAgent, query = ""): Promise<FrameClient> {
  const ws = await FrameClient.connect(`${gw.gateway.wsUrl}${query}`, agent.apiKey);
  await ws.next("ready");
  return ws;
}

/** Submits through a socket and waits for its `submitted` answer. */
async function submitVia(ws: FrameClient, from: TestAgent, message: object, ref: number): Promise<void> {
  ws.send({ type: "submit", ref, envelope: signMessage(message, from.signer) });
  await ws.next("submitted", (f) => f.ref === ref);
}

/** Takes `new_message` frames as they come, acknowledging each, until `done` says so. */
async function takeUntil(sockets: FrameClient[], done: () => boolean, taken: Map<FrameClient, NewMessage[]>) {
  await until(
    async () => {
      for (const ws of sockets) {
        for (const frame of ws.pending()) {
          if (frame.type !== "new_message") continue;
          const message = await ws.next("new_message", (f) => f.id === frame.id);
          ws.send({ type: "acknowledge", id: message.id, from: message.from });
          taken.set(ws, [...(taken.get(ws) ?? []), message]);
        }
      }
      return done();
    },
    (finished) => finished,
    "the messages were taken",
  );
}

/** Several sockets of one agent, through one gateway or two on one store (docs/gateway.md). */
export function severalSocketsSuite(makePair: () => Promise<GatewayPair>): void {
  let pair: GatewayPair;
  let alpha: TestAgent;
  let beta: TestAgent;
  const sockets: FrameClient[] = [];
  beforeEach(async () => {
    pair = await makePair();
    alpha = await pair.a.register("agent-alpha");
    beta = await pair.a.register("agent-beta");
    await handshake(pair.a, alpha, beta);
  });
  afterEach(async () => {
    for (const ws of sockets.splice(0)) await ws.close();
    await pair.close();
  });
  const open = async (gw: TestGateway, agent: TestAgent, query = "") => {
    const ws = await socket(gw, agent, query);
    sockets.push(ws);
    return ws;
  };

  it("receiving sockets share the agent's queue: each message to one of them, none to both", async () => {
    const one = await open(pair.a, beta, "?maxAckPending=2");
    const two = await open(pair.b, beta, "?maxAckPending=2");
    await receive(one, 2); // the handshake's messages, queued before either socket came
    const ids: string[] = [];
    for (let n = 0; n < 12; n++) {
      const note = buildNotification(alpha.sender, "agent-beta", { n });
      expect((await submit(pair.a, alpha, note)).status).toBe(202);
      ids.push(note.params.headers["message-id"] as string);
    }
    const taken = new Map<FrameClient, NewMessage[]>();
    const count = () => [...taken.values()].flat().length;
    await takeUntil([one, two], () => count() >= ids.length, taken);
    const byOne = (taken.get(one) ?? []).map((f) => f.id);
    const byTwo = (taken.get(two) ?? []).map((f) => f.id);
    expect([...byOne, ...byTwo].sort()).toEqual([...ids].sort());
    expect(byOne.filter((id) => byTwo.includes(id))).toEqual([]);
    if (pair.a === pair.b) expect(byOne.length * byTwo.length).toBeGreaterThan(0); // in turns, within their windows
  });

  it("a replies-only socket gets the answers to its own requests and nothing else", async () => {
    const receiving = await open(pair.a, beta);
    await receive(receiving, 2);
    const oneShot = await open(pair.b, beta, "?consume=replies");
    const peer = await open(pair.a, alpha);
    await receive(peer, 2);
    // beta asks alpha through the one-shot socket; alpha answers.
    const request = buildRequest(beta.sender, "agent-alpha", { q: "availability" });
    await submitVia(oneShot, beta, request, 1);
    const asked = await peer.next("new_message", (f) => f.id === request.params.headers["message-id"]);
    peer.send({ type: "acknowledge", id: asked.id, from: asked.from });
    const answer = buildResponse(alpha.sender, request, { slots: 3 });
    await submitVia(peer, alpha, answer, 2);
    // Meanwhile the agent's other work arrives.
    const note = buildNotification(alpha.sender, "agent-beta", { other: "work" });
    await submit(pair.a, alpha, note);
    const answered = await oneShot.next("new_message");
    expect(answered).toMatchObject({ id: answer.result.headers["message-id"], kind: "response", attempt: 1 });
    oneShot.send({ type: "acknowledge", id: answered.id, from: answered.from });
    const work = await receiving.next("new_message");
    expect(work.id).toBe(note.params.headers["message-id"]);
    receiving.send({ type: "acknowledge", id: work.id, from: work.from });
    // Neither got the other's.
    expect(await deliveredBefore(receiving, pair.a, alpha, "agent-beta")).toEqual([]);
    expect(oneShot.pending().filter((f) => f.type === "new_message")).toEqual([]);
    expect(receiving.pending().filter((f) => f.type === "new_message")).toEqual([]);
  });

  it("a handoff's answer, and a notification naming a request in body.messageId, go to the socket that asked", async () => {
    const receiving = await open(pair.a, beta);
    await receive(receiving, 2);
    const oneShot = await open(pair.b, beta, "?consume=replies");
    const handoff = buildHandoff(beta.sender, "agent-alpha", { completed: "a", remaining: "b", context: {} });
    await submitVia(oneShot, beta, handoff, 1);
    const taken = buildResponse(alpha.sender, handoff, { accepted: true });
    expect((await submit(pair.a, alpha, taken)).status).toBe(202);
    expect((await oneShot.next("new_message")).id).toBe(taken.result.headers["message-id"]);
    const request = buildRequest(beta.sender, "agent-alpha", { q: "progress" });
    await submitVia(oneShot, beta, request, 2);
    // How the A2A bridge reports a task's progress: a notification about the request it answers.
    const progress = buildNotification(alpha.sender, "agent-beta", {
      messageId: request.params.headers["message-id"],
      state: "working",
    });
    expect((await submit(pair.a, alpha, progress)).status).toBe(202);
    expect((await oneShot.next("new_message")).id).toBe(progress.params.headers["message-id"]);
    // A refusal answers as a response does.
    const refused = buildErrorResponse(alpha.sender, request, { code: -32021, message: "not allowed" });
    const sent = await submit(pair.a, alpha, refused);
    expect(sent.status).toBe(202);
    expect((await oneShot.next("new_message")).id).toBe(sent.json.id);
    expect(await deliveredBefore(receiving, pair.a, alpha, "agent-beta")).toEqual([]);
  });

  it("a request naming the id of a request the socket made, as its JSON-RPC id or in body.messageId, is not an answer: it goes to the queue", async () => {
    const receiving = await open(pair.a, beta);
    await receive(receiving, 2);
    const oneShot = await open(pair.b, beta, "?consume=replies");
    const request = buildRequest(beta.sender, "agent-alpha", { q: "one-shot" });
    await submitVia(oneShot, beta, request, 1);
    const asked = request.params.headers["message-id"] as string;
    const lookalike = buildRequest(alpha.sender, "agent-beta", { messageId: asked }, { id: asked });
    expect((await submit(pair.a, alpha, lookalike)).status).toBe(202);
    expect((await receiving.next("new_message")).id).toBe(lookalike.params.headers["message-id"]);
    expect(oneShot.pending().filter((f) => f.type === "new_message")).toEqual([]);
  });

  it("the answer to a socket that left goes to the agent's receiving socket", async () => {
    const receiving = await open(pair.a, beta);
    await receive(receiving, 2);
    const oneShot = await open(pair.b, beta, "?consume=replies");
    const request = buildRequest(beta.sender, "agent-alpha", { q: "late" });
    await submitVia(oneShot, beta, request, 1);
    await oneShot.close();
    const answer = buildResponse(alpha.sender, request, { late: true });
    expect((await submit(pair.a, alpha, answer)).status).toBe(202);
    const frame = await receiving.next("new_message", () => true, 15_000);
    expect(frame.id).toBe(answer.result.headers["message-id"]);
  });

  it("handshake replies go to the socket that announced", async () => {
    const carol = await pair.a.register("agent-carol");
    const receiving = await open(pair.a, beta);
    const oneShot = await open(pair.b, beta, "?consume=replies");
    const carolSocket = await open(pair.a, carol);
    await submitVia(
      oneShot,
      beta,
      buildAnnounce(beta.sender, "agent-carol", { capabilities: [], purpose: "x" }),
      1,
    );
    const announced = await carolSocket.next("new_message", (f) => f.method === "agent.announce");
    carolSocket.send({ type: "acknowledge", id: announced.id, from: announced.from });
    const caps = { tools: [], domains: ["x"], limits: [], requests: [] };
    const reply = buildAnnounce(carol.sender, "agent-beta", { capabilities: [], purpose: "x", reply: true });
    await submitVia(carolSocket, carol, reply, 2);
    await submitVia(carolSocket, carol, buildCapabilities(carol.sender, "agent-beta", caps), 3);
    const got = [await oneShot.next("new_message"), await oneShot.next("new_message")];
    expect(got.map((f) => f.method)).toEqual(["agent.announce", "agent.capabilities"]);
    await receive(receiving, 2); // alpha's handshake from before, and nothing of carol's
    expect(receiving.pending().filter((f) => f.type === "new_message")).toEqual([]);
    // carol announcing afresh starts a handshake of her own: it goes to beta's queue.
    const fresh = buildAnnounce(carol.sender, "agent-beta", { capabilities: [], purpose: "again" });
    await submitVia(carolSocket, carol, fresh, 4);
    expect((await receiving.next("new_message")).id).toBe(fresh.params.headers["message-id"]);
    expect(oneShot.pending().filter((f) => f.type === "new_message")).toEqual([]);
  });

  it("nothing waits for no one: with only a replies-only socket the queue stays, for the first receiving one", async () => {
    const oneShot = await open(pair.b, beta, "?consume=replies");
    const note = buildNotification(alpha.sender, "agent-beta", { queued: true });
    await submit(pair.a, alpha, note);
    const id = note.params.headers["message-id"] as string;
    // The barrier: an answer to the replies-only socket, queued after the note, reaches it first.
    const peer = await open(pair.a, alpha);
    await receive(peer, 2);
    const request = buildRequest(beta.sender, "agent-alpha", { q: "barrier" });
    await submitVia(oneShot, beta, request, 1);
    const asked = await peer.next("new_message", (f) => f.id === request.params.headers["message-id"]);
    peer.send({ type: "acknowledge", id: asked.id, from: asked.from });
    const answer = buildResponse(alpha.sender, request, { ok: true });
    await submitVia(peer, alpha, answer, 1);
    expect((await oneShot.next("new_message")).id).toBe(answer.result.headers["message-id"]);
    const status = await api(pair.a.url, `/api/v1/messages/${id}/status`, { apiKey: alpha.apiKey });
    expect(status.json).toMatchObject({ status: "queued", retry_count: 0 });
    expect(oneShot.pending().filter((f) => f.type === "new_message")).toEqual([]);
    const receiving = await open(pair.a, beta);
    const ids = await receive(receiving, 3);
    expect(ids).toContain(id);
  });

  it("a socket that closes gives back what it held to the agent's other socket at once", async () => {
    const stays = await open(pair.a, beta, "?maxAckPending=1");
    await receive(stays, 2);
    const leaves = await open(pair.a, beta);
    // `stays` holds one unacknowledged; the rest go to `leaves`, which takes them and goes.
    const ids: string[] = [];
    for (let n = 0; n < 4; n++) {
      const note = buildNotification(alpha.sender, "agent-beta", { n });
      await submit(pair.a, alpha, note);
      ids.push(note.params.headers["message-id"] as string);
    }
    const held = await stays.next("new_message");
    const taken: string[] = [];
    await until(
      () => leaves.pending().filter((f) => f.type === "new_message").length,
      (n) => n >= ids.length - 1,
      "the other socket took the rest",
    );
    for (const frame of leaves.pending()) if (frame.type === "new_message") taken.push(frame.id);
    await leaves.close();
    stays.send({ type: "acknowledge", id: held.id, from: held.from });
    const back = [];
    for (let i = 0; i < taken.length; i++) {
      const frame = await stays.next("new_message");
      stays.send({ type: "acknowledge", id: frame.id, from: frame.from });
      back.push(frame.id);
    }
    expect(back.sort()).toEqual(taken.sort());
  });
}
