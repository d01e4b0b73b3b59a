/**
 * The gateway's own agents (the A2A bridge's) connected in-process: what the relay of the same
 * process verified reaches them marked verified, with the relay's parsed message; anything put in
 * their inbox another way is still verified by the agent, and a forgery is refused.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AcpAgent } from "../../../src/client/index.js";
import type { DeliveredFrame } from "../../../src/client/connection.js";
import { InProcessConnection } from "../../../src/extensions/a2a/in-process-connection.js";
import { buildRequest, createSigner, generateIdentity, signMessage } from "../../../src/protocol/index.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../../helpers/gateway.js";
import { until } from "../../helpers/until.js";

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

  it("hands over what this gateway's relay verified without verifying it again; the exchange works", async () => {
    const aliceTest = await gw.register("alice");
    const alice = await inProcessAgent(aliceTest);
    const bob = await inProcessAgent(await gw.register("bob"));
    bob.agent.onRequest((body) => ({ echoed: body.text }));

    expect(await alice.agent.request("bob", { text: "hi" })).toEqual({ echoed: "hi" });

    // Handshake and request reach bob verified by the relay, signed by alice's registered key.
    const request = bob.frames.find((f) => f.method === "agent.request");
    expect(request?.verifiedByRelay?.kid).toBe(createSigner(aliceTest.identity).kid);
    expect(request?.verifiedByRelay?.headers["recipient-id"]).toBe("bob");
    expect(request?.envelope).toBe(request?.verifiedByRelay?.message);
    expect(bob.frames.every((f) => f.verifiedByRelay !== undefined)).toBe(true);
    // The response comes back to alice the same way.
    const response = alice.frames.find((f) => f.kind === "response");
    expect(response?.verifiedByRelay?.headers["agent-id"]).toBe("bob");
    expect([...alice.errors, ...bob.errors]).toEqual([]);
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
    const impostor = {
      ...createSigner(aliceTest.identity),
      privateKey: createSigner(generateIdentity("alice", "someone-else")).privateKey,
    };
    const forged = signMessage(
      buildRequest({ agentId: "alice", principalId: aliceTest.identity.principalId, layers: [] }, "bob", {
        text: "pay me",
      }),
      impostor,
    );
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
});
