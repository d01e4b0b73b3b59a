/**
 * A principal cannot be claimed: an agent registered for `p-mallory` signs `principal-id: p-bob`.
 * The gateway refuses it wherever a signed message enters (REST, WebSocket, the collaboration
 * intake, handshake messages), nothing of it is stored, relayed, audited or shown, and an SDK that
 * is handed such a message some other way (here: written straight into the broker, as a gateway
 * that does not check would) does not trust it as bob's.
 */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import {
  buildAnnounce,
  buildNotification,
  buildRequest,
  ErrorCode,
  type MethodMessage,
  signMessage,
} from "../../src/protocol/index.js";
import { agentFor, eventually, SCHEDULING_ANNOUNCE } from "../client/fixtures.js";
import { errorOf, submit } from "../helpers/messaging.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

const PRINCIPAL_POINTER = "/params/headers/principal-id";

/** `message` as mallory signs it while claiming to act for p-bob. */
function claimingBob(mallory: TestAgent, build: (sender: TestAgent["sender"]) => MethodMessage) {
  return signMessage(build({ ...mallory.sender, principalId: "p-bob" }), mallory.signer);
}

function expectPrincipalRefusal(error: { code: number; data: Record<string, unknown> }) {
  expect(error.code).toBe(ErrorCode.Forbidden);
  expect(error.data.problems).toEqual([{ path: PRINCIPAL_POINTER, message: "must be p-mallory" }]);
}

async function relayAudit(gw: TestGateway, agent: string) {
  const entries = [];
  for await (const { entry } of readAudit({ root: join(gw.dataDir, "relay-audit"), agent }))
    entries.push(entry);
  return entries;
}

describe("principal binding: a message claiming another principal", () => {
  const tmp = useTmpDir("acp-principal-binding-");
  let gw: TestGateway;
  let mallory: TestAgent;
  let bob: TestAgent;
  beforeEach(async () => {
    gw = await startTestGateway();
    mallory = await gw.register("mallory-agent", "p-mallory");
    bob = await gw.register("bob-agent", "p-bob");
  });
  afterEach(() => gw.close());

  it("is refused over REST, WebSocket and the collaboration intake; nothing is queued, audited or shown", async () => {
    const inbox = await FrameClient.connect(gw.gateway.wsUrl, bob.apiKey);
    await inbox.next("ready");

    const announce = claimingBob(mallory, (s) => buildAnnounce(s, "bob-agent", SCHEDULING_ANNOUNCE));
    const overRest = await api(gw.url, "/api/v1/messages", { apiKey: mallory.apiKey, body: announce });
    expect(overRest.status).toBe(403);
    expectPrincipalRefusal(errorOf(overRest.json));

    const request = claimingBob(mallory, (s) => buildRequest(s, "bob-agent", { pay: 100 }));
    const socket = await FrameClient.connect(gw.gateway.wsUrl, mallory.apiKey);
    await socket.next("ready");
    socket.send({ type: "submit", ref: 1, envelope: request });
    const overWs = await socket.next("error", (f) => f.ref === 1);
    expectPrincipalRefusal(overWs.error as { code: number; data: Record<string, unknown> });

    const status = claimingBob(mallory, (s) =>
      buildNotification(s, "mallory-agent", { state: "busy" }, { method: "agent.status" }),
    );
    const overCollab = await api(gw.url, "/api/v1/status", { apiKey: mallory.apiKey, body: status });
    expect(overCollab.status).toBe(403);
    expectPrincipalRefusal(errorOf(overCollab.json));

    // Unchanged: nothing stored under either id, no published status, nothing in bob's view.
    for (const message of [announce, request]) {
      expect(
        await gw.gateway.broker.get({
          from: "mallory-agent",
          id: message.params.headers["message-id"] as string,
        }),
      ).toBeNull();
    }
    const statusNow = await api(gw.url, "/api/v1/status/mallory-agent", { apiKey: bob.apiKey });
    expect(statusNow.json.status).toBeNull();
    expect((await api(gw.url, "/api/v1/messages", { apiKey: bob.apiKey })).json).toMatchObject({
      items: [],
    });

    // Healthy afterwards: mallory's honest announce is relayed, and it is the first thing bob sees.
    const honest = await submit(gw, mallory, buildAnnounce(mallory.sender, "bob-agent", SCHEDULING_ANNOUNCE));
    expect(honest.status).toBe(202);
    const first = await inbox.next("new_message");
    expect(first.id).toBe(honest.json.id);
    expect(inbox.pending()).toEqual([]);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);

    // The relay audit and the dashboard record only the honest message, under p-mallory.
    await expect.poll(async () => (await relayAudit(gw, "mallory-agent")).length).toBe(1);
    expect((await relayAudit(gw, "mallory-agent"))[0]?.from).toEqual({
      agent: "mallory-agent",
      principal: "p-mallory",
    });
    const feed = await api(gw.url, "/api/v1/dashboard/feed", {
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    const items = feed.json.items as { id: string; from: { principal: string | null } }[];
    expect(items.map((i) => [i.id, i.from.principal])).toEqual([[honest.json.id, "p-mallory"]]);
    await socket.close();
    await inbox.close();
  });

  it("a recipient's SDK does not trust a claimed principal the registry does not vouch for", async () => {
    const dir = tmp();
    const carol = await gw.register("carol-agent", "p-carol");
    const agent = agentFor(gw, carol, dir, { trust: { knownPrincipals: ["p-bob"] } });
    const errors: Error[] = [];
    agent.on("error", (err) => errors.push(err));
    await agent.connect();
    try {
      // Written into the broker directly, as a gateway that did not check would have relayed it.
      const forged = claimingBob(mallory, (s) => buildAnnounce(s, "carol-agent", SCHEDULING_ANNOUNCE));
      const id = forged.params.headers["message-id"] as string;
      await gw.gateway.broker.submit({
        id,
        from: "mallory-agent",
        to: "carol-agent",
        kind: "notification",
        method: "agent.announce",
        envelope: JSON.stringify(forged),
        submittedAt: forged.params.headers.timestamp,
      });
      await eventually(
        async () => (await gw.gateway.broker.get({ from: "mallory-agent", id }))?.status === "failed",
        "refused",
      );
      expect(errors.map((e) => e.message).join("\n")).toContain(
        "mallory-agent is registered for principal p-mallory, not p-bob",
      );
      expect(agent.handshakeState("mallory-agent")).toBe("none");
      expect(agent.trust("mallory-agent")).toBeUndefined();

      // Bob's real agent still gets bob's trust: the check is against the registry, not a blanket refusal.
      const bobAgent = agentFor(gw, bob, `${dir}/bob`);
      await bobAgent.connect();
      try {
        await bobAgent.handshake("carol-agent");
        expect(agent.trust("bob-agent")).toMatchObject({ principalId: "p-bob", cap: 0.95 });
      } finally {
        await bobAgent.close();
      }
    } finally {
      await agent.close();
    }
  });
});
