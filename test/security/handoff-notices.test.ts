/**
 * A handoff's expiry is the gateway's decision, told by its collaboration agent (principal
 * `acp-gateway-collab`). Replayed: another agent sends a party the same `agent.handoff.expired`
 * notice, in its own name and claiming the gateway's principal. The claim is refused at the relay;
 * the notice in its own name reaches the party but its SDK does not pass it on as an expiry; the
 * handoff is unchanged, and the genuine expiry is still told once. The gateway stays healthy.
 */
import { afterEach, describe, expect, it } from "vitest";
import { CollabClient, type CollabNotice } from "../../src/client/collab.js";
import { buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { collabExtension } from "../../src/server.js";
import { agentFor } from "../client/fixtures.js";
import { until } from "../helpers/until.js";
import { errorOf, submit } from "../helpers/messaging.js";
import { api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-handoff-notices-");
let gw: TestGateway | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await gw?.close();
  gw = undefined;
});

describe("handoff expiry notices come only from the gateway", () => {
  it("a forged expiry notice is refused or not passed on; the handoff is unchanged; the real one is told", async () => {
    let offset = 0;
    gw = await startTestGateway({
      extensions: [collabExtension({ clock: () => new Date(Date.now() + offset), handoff: { sweepMs: 50 } })],
    });
    const dir = tmp();
    const member = async (agentId: string) => {
      const test = await gw!.register(agentId, `principal-${agentId}`);
      const agent = agentFor(gw!, test, `${dir}/${agentId}`);
      await agent.connect();
      closers.push(() => agent.close());
      return {
        test,
        agent,
        collab: new CollabClient({ agent, identity: test.identity, apiKey: test.apiKey }),
      };
    };
    const boss = await member("boss");
    await member("worker");
    const mallory = await member("mallory");
    const heard: CollabNotice[] = [];
    boss.collab.on("handoff", (notice) => heard.push(notice));
    const offered = await boss.collab.handoffs.offer("worker", {
      completed: "-",
      remaining: "all",
      context: {},
    });
    const forged = {
      handoffId: offered.handoffId,
      delegator: "boss",
      delegate: "worker",
      expired: "offer",
      due: new Date().toISOString(),
      refunded: 0,
    };

    // Claiming the gateway's principal is refused where it enters.
    const claim = signMessage(
      buildNotification({ ...mallory.test.sender, principalId: "acp-gateway-collab" }, "boss", forged, {
        method: "agent.handoff.expired",
      }),
      mallory.test.signer,
    );
    const refused = await submit(gw, mallory.test, claim);
    expect(refused.status).toBe(403);
    expect(errorOf(refused.json).code).toBe(ErrorCode.Forbidden);

    // In its own name it is delivered (any agent may notify), but not passed on as an expiry.
    const delivered: string[] = [];
    boss.agent.on("message", (m) => m.method === "agent.handoff.expired" && delivered.push(m.from));
    await mallory.agent.notify("boss", forged, { method: "agent.handoff.expired" });
    await until(
      () => delivered,
      (d) => d.includes("mallory"),
      "the forged notice reached boss",
    );
    expect(heard).toEqual([]);
    expect((await boss.collab.handoffs.get(offered.handoffId)).status).toBe("offered");

    // The real expiry is told, once, by the gateway's agent.
    offset = 25 * 3_600_000;
    await until(
      () => heard.length,
      (n) => n === 1,
      "the gateway tells boss",
    );
    expect(heard[0]?.context.principalId).toBe("acp-gateway-collab");
    expect((await boss.collab.handoffs.get(offered.handoffId)).status).toBe("expired");
    expect((await api(gw.url, "/healthz")).status).toBe(200);
  });
});
