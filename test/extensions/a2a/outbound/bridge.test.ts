import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { a2aOutboundExtension } from "../../../../src/extensions/a2a/outbound/extension.js";
import { secretKeeper } from "../../../../src/extensions/custody/sealing.js";
import { AcpError } from "../../../../src/protocol/index.js";
import { agentFor } from "../../../client/fixtures.js";
import { startTestGateway } from "../../../helpers/gateway.js";
import { until } from "../../../helpers/until.js";
import { useOutboundBed } from "./testbed.js";

/** The gateway's relay audit entries of messages `agent` sent (`<data>/relay-audit/<agent>/*.jsonl`). */
function relayAudit(
  dataDir: string,
  agent: string,
): { type: string; method: string; to: { agent: string } }[] {
  const dir = join(dataDir, "relay-audit", agent);
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));
  } catch {
    return [];
  }
  return files.flatMap((f) =>
    readFileSync(join(dir, f), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line)),
  );
}

describe("ACP agents calling A2A agents through the bridge", () => {
  const bed = useOutboundBed();

  it("registers an A2A agent by URL and answers an ordinary signed request (message/send)", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    const added = await bed.addA2A({ url: server.url });
    expect(added.status).toBe(201);
    expect(added.json).toMatchObject({
      agent_id: "a2a-echo-agent",
      principal_id: `a2a:${new URL(server.url).host}`,
      card_url: expect.any(String),
      endpoint: `${server.url}/a2a/jsonrpc`,
      streaming: false,
      signature: { signed: false },
      bridge_key: expect.any(String),
      registered_at: expect.any(String),
    });
    // The camelCase names are still sent, for the deprecation period.
    expect(added.json).toMatchObject({
      agentId: added.json.agent_id,
      principalId: added.json.principal_id,
      cardUrl: added.json.card_url,
      bridgeKey: added.json.bridge_key,
      registeredAt: added.json.registered_at,
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
    // The bridge's side went through the relay: audited like any agent's messages.
    const sent = await until(
      () => relayAudit(bed.gw.dataDir, "a2a-echo-agent"),
      (entries) => entries.some((e) => e.type === "response"),
      "the bridge's response is in the relay audit",
    );
    expect(sent.map((e) => e.method)).toEqual(
      expect.arrayContaining(["agent.announce", "agent.capabilities", "agent.a2a.status", "agent.response"]),
    );
    expect(sent.every((e) => e.to.agent === "alice")).toBe(true);
  });

  it("has the relay verify the bridge's first signature in full, then skip re-verifying its own", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    await bed.addA2A({ url: server.url });
    const fromBridge: { method: string; verifiedKid: string | undefined }[] = [];
    const stop = bed.gw.gateway.context.relay.onAccepted(({ entry, verifiedKid }) => {
      if (entry.from.agent === "a2a-echo-agent") fromBridge.push({ method: entry.type, verifiedKid });
    });
    try {
      const alice = await bed.caller();
      await alice.request("a2a-echo-agent", { text: "one" });
      await alice.request("a2a-echo-agent", { text: "two" });
    } finally {
      stop();
    }
    // The handshake's first message was verified against the bridge key; the rest were signed here.
    expect(fromBridge.length).toBeGreaterThanOrEqual(4);
    expect(fromBridge[0]?.verifiedKid).toMatch(/.+/);
    expect(fromBridge.slice(1).map((m) => m.verifiedKid)).toEqual(fromBridge.slice(1).map(() => undefined));
    expect(fromBridge.filter((m) => m.method === "response")).toHaveLength(2);
  });

  it("keeps serving registered A2A agents after a gateway restart", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    const alice = await bed.caller();
    await alice.request("echo", { text: "before" });
    await alice.close();
    const dataDir = bed.gw.dataDir;
    await bed.gw.close();
    const again = await startTestGateway({
      dataDir,
      allowPrivateUrls: true,
      extensions: [
        a2aOutboundExtension({
          keyDir: join(dataDir, "a2a-bridge"),
          secrets: secretKeeper({ data: dataDir }),
        }),
      ],
    });
    bed.cleanup(() => again.close());
    const bob = await again.register("bob", "principal-bob");
    const caller = agentFor(again, bob, join(bed.dir, "bob"));
    await caller.connect();
    bed.cleanup(() => caller.close());
    expect(await caller.request("echo", { text: "after" })).toMatchObject({ a2a: { state: "completed" } });
    expect(server.received).toEqual(["before", "after"]);
  });

  it("streams when the card says so, and relays the task's states to the caller", async () => {
    const server = await bed.a2a({ behaviour: "echo-task", streaming: true });
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    const alice = await bed.caller();
    const states: string[] = [];
    alice.onNotification((body, context) => {
      if (context.method === "agent.a2a.status") states.push(String(body.state));
    });
    const body = await alice.request("echo", { text: "stream me" });
    expect(body).toMatchObject({ text: "done: stream me\nupper: STREAM ME", a2a: { state: "completed" } });
    expect(states).toContain("submitted");
  });

  it("refuses a second registration under a taken id, naming the field", async () => {
    const server = await bed.a2a();
    expect((await bed.addA2A({ url: server.url })).status).toBe(201);
    const again = await bed.addA2A({ url: server.url });
    expect(again.status).toBe(409);
    expect(again.json.error).toMatchObject({
      message: expect.stringContaining("the agent id a2a-echo-agent is taken"),
      data: { problems: [{ path: "/agent_id" }] },
    });
    // The deprecated camelCase name is still read.
    const renamed = await bed.addA2A({ url: server.url, agentId: "echo-2" });
    expect(renamed.status).toBe(201);
    expect(renamed.json).toMatchObject({ agent_id: "echo-2" });
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
