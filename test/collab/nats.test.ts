import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import { agentFor } from "../client/fixtures.js";
import { startTestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { communitySuite } from "./suite-community.js";
import { handoffSuite } from "./suite-handoff.js";
import { negotiationSuite } from "./suite-negotiation.js";
import { teamSuite } from "./suite-team.js";
import type { GatewayFactory } from "./testbed.js";
import { until } from "./testbed.js";

const startNats = useNatsServer();

/** A gateway on a fresh nats-server per test (stopped with the test). */
const onNats: GatewayFactory = async (options = {}) =>
  startTestGateway({ ...options, natsUrl: (await startNats()).url });

describeWithNats("collaboration on NATS JetStream", () => {
  describe("negotiation", () => negotiationSuite(onNats));
  describe("handoff", () => handoffSuite(onNats));
  describe("teams", () => teamSuite(onNats));
  describe("knowledge, disputes, status", () => communitySuite(onNats));

  it("two gateways on one NATS share sessions, the knowledge index and status broadcasts", async () => {
    const server = await startNats();
    const dirs = [mkdtempSync(join(tmpdir(), "acp-collab-a-")), mkdtempSync(join(tmpdir(), "acp-collab-b-"))];
    const a = await startTestGateway({ natsUrl: server.url, dataDir: dirs[0] });
    const b = await startTestGateway({ natsUrl: server.url, dataDir: dirs[1] });
    const agents: { close(): Promise<void> }[] = [];
    try {
      const alice = await a.register("alice");
      const bob = await a.register("bob");
      const aliceAgent = agentFor(a, alice, dirs[0] as string);
      const bobAgent = agentFor(b, bob, dirs[1] as string);
      for (const agent of [aliceAgent, bobAgent]) {
        await agent.connect();
        agents.push(agent);
      }
      const atA = new CollabClient({ agent: aliceAgent, identity: alice.identity, apiKey: alice.apiKey });
      const atB = new CollabClient({ agent: bobAgent, identity: bob.identity, apiKey: bob.apiKey });

      // A proposal made through A is countered and accepted through B.
      const { sessionId } = await atA.negotiations.propose("bob", { price: 10 });
      await atB.negotiations.counter(sessionId, { price: 12 });
      const accepted = await atA.negotiations.accept(sessionId);
      expect(accepted.agreement.document.terms).toEqual({ price: 12 });

      // Published through A, found through B's own index (rebuilt from NATS KV, kept current by its watch).
      await atA.teams.create("duo", "Duo", ["bob"]);
      await atA.teams.publish("duo", {
        title: "Gateway failover",
        content: "Clients reconnect to any gateway on the cluster.",
      });
      const hits = await until(
        () => atB.teams.search("duo", "failover"),
        (h) => h.length === 1,
        "B indexes A's entry",
      );
      expect(hits[0]?.title).toBe("Gateway failover");

      // A status published through B reaches a subscriber on A.
      const seen: string[] = [];
      const subscription = atA.subscribeStatus(
        (e) => seen.push(`${e.type}:${e.type === "presence" ? e.presence.state : e.status.update.state}`),
        ["bob"],
      );
      await subscription.ready;
      await atB.publishStatus({ state: "away" });
      await until(
        () => seen,
        (s) => s.includes("status:away"),
        "A's subscriber sees B's status",
      );
      subscription.close();
    } finally {
      for (const agent of agents) await agent.close();
      await a.close();
      await b.close();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  });
});
