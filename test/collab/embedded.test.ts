import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import { collabExtension } from "../../src/server.js";
import { agentFor } from "../client/fixtures.js";
import { ADMIN_TOKEN, api, startTestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { communitySuite } from "./suite-community.js";
import { handoffSuite } from "./suite-handoff.js";
import { handoffDeadlineSuite } from "./suite-handoff-deadlines.js";
import { negotiationSuite } from "./suite-negotiation.js";
import { teamSuite } from "./suite-team.js";
import { until } from "../helpers/collab-testbed.js";

describe("collaboration on the embedded broker", () => {
  describe("negotiation", () => negotiationSuite((options) => startTestGateway(options)));
  describe("handoff", () => handoffSuite((options) => startTestGateway(options)));
  describe("handoff deadlines", () => handoffDeadlineSuite((options) => startTestGateway(options)));
  describe("teams", () => teamSuite((options) => startTestGateway(options)));
  describe("knowledge, disputes, status", () => communitySuite((options) => startTestGateway(options)));
});

describe("handoff deadlines across a restart", () => {
  const tmp = useTmpDir("acp-expiry-restart-");

  it("an offer made before the gateway stopped expires when it starts again past the respondBy, its escrow refunded", async () => {
    const dataDir = tmp();
    let offset = 0;
    const start = () =>
      startTestGateway({
        dataDir,
        extensions: [
          collabExtension({
            clock: () => new Date(Date.now() + offset),
            handoff: { sweepMs: 50 },
            auditRoot: join(dataDir, "collab-audit"),
          }),
        ],
      });
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    let gw = await start();
    try {
      const boss = await gw.register("boss");
      await gw.register("worker");
      expect(
        (await api(gw.url, "/api/v1/ledger/grants", { headers: admin, body: { agentId: "boss", amount: 5 } }))
          .status,
      ).toBe(201);
      const agent = agentFor(gw, boss, dataDir);
      await agent.connect();
      const collab = new CollabClient({ agent, identity: boss.identity, apiKey: boss.apiKey });
      // The worker was never online: the offer is queued, its escrow reserved.
      const offered = await collab.handoffs.offer(
        "worker",
        { completed: "-", remaining: "all", context: {} },
        { escrow: 5 },
      );
      expect(offered).toMatchObject({ delivery: "queued", escrowState: "reserved" });
      await agent.close();
      await gw.close();

      offset = 25 * 3_600_000;
      gw = await start();
      const expired = await until(
        async () => (await api(gw.url, `/api/v1/handoffs/${offered.handoffId}`, { headers: admin })).json,
        (h) => h.status === "expired",
        "expired after the restart",
      );
      expect(expired).toMatchObject({ escrowState: "refunded", expiry: { of: "offer" } });
      expect((await api(gw.url, "/api/v1/ledger/boss", { headers: admin })).json).toMatchObject({
        balance: 5,
        escrowed: 0,
      });
    } finally {
      await gw.close();
    }
  });
});
