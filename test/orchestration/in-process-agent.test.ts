/**
 * The gateway's own agents (the A2A bridge's) connected in-process: what the relay of the same
 * process verified reaches them marked verified, with the relay's parsed message; anything put in
 * their inbox another way is still verified by the agent, and a forgery is refused.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { DeliveredFrame } from "../../src/client/connection.js";
import { AcpAgent } from "../../src/client/index.js";
import { InProcessConnection } from "../../src/orchestration/in-process-agent.js";
import { buildRequest, createSigner, generateIdentity, signMessage } from "../../src/protocol/index.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

describe("InProcessConnection", () => {
  let gw: TestGateway;
  const agents: AcpAgent[] = [];

  beforeEach(async () => {
    gw = await startTestGateway();
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    await gw.close();
  });

  /** An in-process AcpAgent; `frames` records every delivery its connection hands it. */
  async function inProcessAgent(test: TestAgent) {
    const frames: DeliveredFrame[] = [];
    const errors: Error[] = [];
    const agent = new AcpAgent({
      gateway: gw.url,
      identity: test.identity,
      apiKey: test.apiKey,
      audit: false,
      state: false,
      requestTimeoutMs: 10_000,
      connection: (agentId, events) =>
        new InProcessConnection(gw.gateway.context, agentId, {
          ...events,
          message: (frame) => {
            frames.push(frame);
            events.message(frame);
          },
        }),
    });
    agent.on("error", (err) => errors.push(err));
    await agent.connect();
    agents.push(agent);
    return { agent, frames, errors };
  }

  /** A request from `test`'s agent to `to` that names its registered key but is signed by another. */
  function forgedRequest(test: TestAgent, to: string) {
    const impostor = {
      ...createSigner(test.identity),
      privateKey: createSigner(generateIdentity(test.identity.agentId, "someone-else")).privateKey,
    };
    const sender = { agentId: test.identity.agentId, principalId: test.identity.principalId, layers: [0, 1] };
    return signMessage(buildRequest(sender, to, { text: "pay me" }), impostor);
  }

  it("reads as online for as long as it is connected, like an agent whose socket sends heartbeats", async () => {
    await gw.close();
    gw = await startTestGateway({ heartbeatMs: 300 });
    const { agent } = await inProcessAgent(await gw.register("bridge"));
    const { presence } = gw.gateway.context;
    // Past the staleness limit of one heartbeat-less connect, it is still online.
    await new Promise((resolve) => setTimeout(resolve, presence.staleAfterMs * 2));
    expect((await presence.get("bridge")).state).toBe("online");
    await agent.close();
    expect((await presence.get("bridge")).state).toBe("offline");
  });

  it("hands over what this gateway's relay verified without verifying it again; the exchange works", async () => {
    // The A2A case: an in-process bridge agent asks an agent connected over the WebSocket.
    const targetTest = await gw.register("target");
    const target = new AcpAgent({
      gateway: gw.url,
      identity: targetTest.identity,
      apiKey: targetTest.apiKey,
      audit: false,
      state: false,
    });
    agents.push(target);
    target.onRequest((body) => ({ echoed: body.text }));
    await target.connect();
    const bridge = await inProcessAgent(await gw.register("bridge"));

    expect(await bridge.agent.request("target", { text: "hi" })).toEqual({ echoed: "hi" });
    expect(await bridge.agent.request("target", { text: "again" })).toEqual({ echoed: "again" });

    // Handshake replies and responses reach the bridge verified by the relay, with target's key.
    const kinds = bridge.frames.map((f) => f.method ?? f.kind);
    expect(bridge.frames.filter((f) => f.kind === "response")).toHaveLength(2);
    for (const frame of bridge.frames) {
      expect(frame.verifiedByRelay?.kid, kinds.join()).toBe(createSigner(targetTest.identity).kid);
      expect(frame.verifiedByRelay?.headers["recipient-id"]).toBe("bridge");
      expect(frame.envelope).toBe(frame.verifiedByRelay?.message);
    }
    expect(bridge.errors).toEqual([]);
  });

  it("verifies what the relay did not: a forgery put straight into the inbox is refused", async () => {
    const aliceTest = await gw.register("alice");
    const alice = await inProcessAgent(aliceTest);
    const bob = await inProcessAgent(await gw.register("bob"));
    let handled = 0;
    bob.agent.onRequest(() => {
      handled++;
      return { ok: true };
    });
    await alice.agent.handshake("bob");

    // Claims alice's registered key id but is signed by another key, and never went through the relay.
    const forged = forgedRequest(aliceTest, "bob");
    const { headers } = forged.params;
    const id = headers["message-id"] ?? "";
    await gw.gateway.context.broker.submit({
      id,
      from: "alice",
      to: "bob",
      kind: "request",
      method: "agent.request",
      envelope: JSON.stringify(forged),
      submittedAt: headers.timestamp ?? "",
    });

    await until(
      () => bob.errors.some((err) => err.message.includes(`refused ${id}`)),
      (refused) => refused,
      "bob refuses the forgery",
    );
    const frame = bob.frames.find((f) => f.id === id);
    expect(frame).toBeDefined();
    expect(frame?.verifiedByRelay).toBeUndefined();
    expect(bob.errors.find((err) => err.message.includes(id))).toMatchObject({ reason: "SignatureInvalid" });
    expect(handled).toBe(0);
  });

  it("has the relay verify an agent's first submission in full, then skip re-verifying its own signatures", async () => {
    const aliceTest = await gw.register("alice");
    const bob = await inProcessAgent(await gw.register("bob"));
    let handled = 0;
    bob.agent.onRequest(() => {
      handled++;
      return { ok: true };
    });
    // A connection whose first submission is a forgery: the relay verifies it and refuses it.
    const connection = new InProcessConnection(gw.gateway.context, "alice", {
      message: () => undefined,
      connected: () => undefined,
      disconnected: () => undefined,
      resubmit: () => undefined,
      degraded: () => undefined,
      succeeded: () => undefined,
      error: () => undefined,
    });
    await connection.connect();
    const first = forgedRequest(aliceTest, "bob");
    await expect(connection.submit(first)).rejects.toMatchObject({ reason: "SignatureInvalid" });
    await connection.close();

    // After a verified submission, the relay takes alice's in-process signatures as made here; the
    // recipient still verifies them and refuses a bad one.
    const alice = await inProcessAgent(aliceTest);
    await alice.agent.handshake("bob");
    const resolved = await gw.gateway.context.registry.resolve("alice");
    const forged = forgedRequest(aliceTest, "bob");
    const text = JSON.stringify(forged);
    const id = forged.params.headers["message-id"] ?? "";
    await gw.gateway.context.relay.submit(resolved!, text, text.length, { signedHere: true });
    await until(
      () => bob.errors.some((err) => err.message.includes(`refused ${id}`)),
      (refused) => refused,
      "bob refuses the bad signature",
    );
    expect(bob.errors.find((err) => err.message.includes(id))).toMatchObject({ reason: "SignatureInvalid" });
    expect(handled).toBe(0);
    // A signature naming any other key is checked in full, signedHere or not.
    const other = signMessage(
      buildRequest({ agentId: "alice", principalId: aliceTest.identity.principalId, layers: [0, 1] }, "bob", {
        text: "x",
      }),
      createSigner(generateIdentity("alice", "someone-else")),
    );
    const otherText = JSON.stringify(other);
    await expect(
      gw.gateway.context.relay.submit(resolved!, otherText, otherText.length, { signedHere: true }),
    ).rejects.toMatchObject({ reason: "UnknownKey" });
  });
});
