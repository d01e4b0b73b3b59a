/** A2A 0.3 agents (card with `url` + `preferredTransport`, methods `message/send`…), served by the SDK's own 0.3 layer. */
import { describe, expect, it } from "vitest";
import { useOutboundBed } from "./testbed.js";

describe("A2A out: A2A 0.3 agents", () => {
  const bed = useOutboundBed();

  it.each([
    ["polling (message/send, then tasks/get)", false],
    ["streaming (message/stream)", true],
  ])("registers a 0.3 card and calls the agent in 0.3, %s", async (_name, streaming) => {
    const server = await bed.a2a({ legacy: true, streaming });
    // The agent really is a 0.3 one: its card has no 1.0 interfaces.
    const card = (await (await fetch(server.cardUrl)).json()) as Record<string, unknown>;
    expect(card).toMatchObject({
      protocolVersion: expect.stringMatching(/^0\.3/),
      preferredTransport: "JSONRPC",
    });
    expect(card.supportedInterfaces).toBeUndefined();

    const added = await bed.addA2A({ url: server.url, agent_id: "old" });
    expect(added.status, JSON.stringify(added.json)).toBe(201);
    expect(added.json).toMatchObject({
      endpoint: `${server.url}/a2a/jsonrpc`,
      protocolVersion: "0.3",
      streaming,
    });
    const alice = await bed.caller();
    const answer = await alice.request("old", { text: "hello" });
    expect(answer).toMatchObject({
      text: "done: hello\nupper: HELLO",
      a2a: { kind: "task", state: "completed" },
      artifacts: [{ parts: [{ text: "upper: HELLO" }] }],
    });
    const status = await alice.request(
      "old",
      { taskId: (answer.a2a as { taskId: string }).taskId },
      { method: "agent.a2a.task" },
    );
    expect(status).toMatchObject({ a2a: { state: "completed" } });
  });

  it("names the field of a 0.3 card that cannot be used", async () => {
    const server = await bed.a2a({
      rawCard: () => ({ protocolVersion: "0.3.0", name: "Old", url: "not a url" }),
    });
    const refused = await bed.addA2A({ url: server.url });
    expect(refused.status).toBe(400);
    const error = refused.json.error as { message: string; data: { problems: { path: string }[] } };
    expect(error.message).toMatch(/is not a valid A2A 0\.3 card: \/card\/url must be an absolute URL/);
  });
});
