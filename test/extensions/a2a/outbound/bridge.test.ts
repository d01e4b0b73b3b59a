import { describe, expect, it } from "vitest";
import { AcpError } from "../../../../src/protocol/index.js";
import { useOutboundBed } from "./testbed.js";

describe("ACP agents calling A2A agents through the bridge", () => {
  const bed = useOutboundBed();

  it("registers an A2A agent by URL and answers an ordinary signed request (message/send)", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    const added = await bed.addA2A({ url: server.url });
    expect(added.status).toBe(201);
    expect(added.json).toMatchObject({
      agentId: "a2a-echo-agent",
      principalId: `a2a:${new URL(server.url).host}`,
      endpoint: `${server.url}/a2a/jsonrpc`,
      streaming: false,
      signature: { signed: false },
    });
    const alice = await bed.caller();
    const body = await alice.request("a2a-echo-agent", { text: "hello" });
    expect(body).toMatchObject({
      text: "done: hello\nupper: HELLO",
      a2a: { kind: "task", state: "completed" },
      artifacts: [{ artifactId: "result", parts: [{ text: "upper: HELLO" }] }],
    });
    expect(server.received).toEqual(["hello"]);
    expect(alice.handshakeState("a2a-echo-agent")).toBe("established");
  });

  it("streams when the card says so, and relays the task's states to the caller", async () => {
    const server = await bed.a2a({ behaviour: "echo-task", streaming: true });
    await bed.addA2A({ url: server.url, agentId: "echo" });
    const alice = await bed.caller();
    const states: string[] = [];
    alice.onNotification((body, context) => {
      if (context.method === "agent.a2a.status") states.push(String(body.state));
    });
    const body = await alice.request("echo", { text: "stream me" });
    expect(body).toMatchObject({ text: "done: stream me\nupper: STREAM ME", a2a: { state: "completed" } });
    expect(states).toContain("submitted");
  });

  it("answers with a message when the A2A agent replies with one", async () => {
    const server = await bed.a2a({ behaviour: "echo-message" });
    await bed.addA2A({ url: server.url });
    const alice = await bed.caller();
    const body = await alice.request("a2a-echo-agent", { text: "hi" });
    expect(body).toMatchObject({ text: "echo: hi", a2a: { kind: "message" } });
  });

  it("refuses a request body the bridge cannot turn into an A2A message, naming the field", async () => {
    const server = await bed.a2a();
    await bed.addA2A({ url: server.url });
    const alice = await bed.caller();
    const err = await alice.request("a2a-echo-agent", { text: 42 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcpError);
    expect((err as AcpError).code).toBe(-32602);
    expect((err as AcpError).data.problems).toEqual([expect.objectContaining({ path: "/params/body/text" })]);
    expect(server.received).toEqual([]);
  });
});
