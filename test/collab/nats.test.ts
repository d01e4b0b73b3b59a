import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import { CollabClient } from "../../src/client/collab.js";
import { collabExtension } from "../../src/server.js";
import { agentFor } from "../client/fixtures.js";
import { api, startTestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { communitySuite } from "./suite-community.js";
import { handoffSuite } from "./suite-handoff.js";
import { handoffDeadlineSuite } from "./suite-handoff-deadlines.js";
import { negotiationSuite } from "./suite-negotiation.js";
import { teamSuite } from "./suite-team.js";
import type { GatewayFactory } from "../helpers/collab-testbed.js";
import { until } from "../helpers/collab-testbed.js";

const startNats = useNatsServer();
const tmp = useTmpDir("acp-collab-");

/** A gateway on a fresh nats-server per test (stopped with the test). */
const onNats: GatewayFactory = async (options = {}) =>
  startTestGateway({ ...options, natsUrl: (await startNats()).url });

describeWithNats("collaboration on NATS JetStream", () => {
  describe("negotiation", () => negotiationSuite(onNats));
  describe("handoff", () => handoffSuite(onNats));
  describe("handoff deadlines", () => handoffDeadlineSuite(onNats));
  describe("teams", () => teamSuite(onNats));
  describe("knowledge, disputes, status", () => communitySuite(onNats));

  it("two gateways on one NATS share sessions, the knowledge index and status broadcasts", async () => {
    const server = await startNats();
    const dirs = [tmp(), tmp()];
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
      await atA.teams.publish("alice.duo", {
        title: "Gateway failover",
        content: "Clients reconnect to any gateway on the cluster.",
      });
      const hits = await until(
        () => atB.teams.search("alice.duo", "failover"),
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
    }
  });

  it("two gateways on one NATS both sweep, and exactly one expires a handoff: one refund, one audit entry, one notice each", async () => {
    const server = await startNats();
    const dirs = [tmp(), tmp()];
    let offset = 0;
    const gateway = (dir: string) =>
      startTestGateway({
        natsUrl: server.url,
        dataDir: dir,
        extensions: [
          collabExtension({
            clock: () => new Date(Date.now() + offset),
            handoff: { sweepMs: 20 },
            auditRoot: join(dir, "collab-audit"),
          }),
        ],
      });
    const [a, b] = [await gateway(dirs[0] as string), await gateway(dirs[1] as string)];
    const agents: { close(): Promise<void> }[] = [];
    try {
      const boss = await a.register("boss");
      const worker = await a.register("worker");
      const bossAgent = agentFor(a, boss, dirs[0] as string);
      const workerAgent = agentFor(b, worker, dirs[1] as string);
      for (const agent of [bossAgent, workerAgent]) {
        await agent.connect();
        agents.push(agent);
      }
      const atA = new CollabClient({ agent: bossAgent, identity: boss.identity, apiKey: boss.apiKey });
      const atB = new CollabClient({ agent: workerAgent, identity: worker.identity, apiKey: worker.apiKey });
      const told: string[] = [];
      for (const [who, client] of [
        ["boss", atA],
        ["worker", atB],
      ] as const)
        client.on(
          "handoff",
          (n) => n.method === "agent.handoff.expired" && told.push(`${who} of ${n.body.handoffId}`),
        );
      const grant = await api(a.url, "/api/v1/ledger/grants", {
        headers: { authorization: `Bearer ${a.adminToken}` },
        body: { agentId: "boss", amount: 10 },
      });
      expect(grant.status).toBe(201);
      const offered = await atA.handoffs.offer(
        "worker",
        { completed: "-", remaining: "all", context: {} },
        { escrow: 10 },
      );

      offset = 25 * 3_600_000;
      await until(
        () => told.length,
        (n) => n === 2,
        "both parties are told",
      );
      await until(
        () => atA.handoffs.get(offered.handoffId),
        (h) => h.status === "expired" && (h.toTell ?? []).length === 0,
        "expired, nobody left to tell",
      );
      // Both gateways sweep on: a later offer expires and its notices reach both parties, and
      // by then nothing more was said of the first.
      const later = await atA.handoffs.offer("worker", { completed: "-", remaining: "all", context: {} });
      offset = 50 * 3_600_000;
      await until(
        () => told.filter((notice) => notice.endsWith(later.handoffId)).length,
        (n) => n === 2,
        "both parties are told of the later offer",
      );
      expect(told.filter((notice) => notice.endsWith(offered.handoffId)).sort()).toEqual([
        `boss of ${offered.handoffId}`,
        `worker of ${offered.handoffId}`,
      ]);
      const movements = (await atA.handoffs.balance()).movements.map((m) => m.kind);
      expect(movements).toEqual(["grant", "reserve", "refund"]);
      const expiries: string[] = [];
      // A gateway that audited nothing has no log at all.
      for (const dir of dirs.filter((d) => existsSync(join(d, "collab-audit", "collab"))))
        for await (const { entry } of readAudit({ root: join(dir, "collab-audit"), agent: "collab" }))
          if (entry.method === "collab.handoff.expired") expiries.push(entry.id as string);
      expect(expiries.sort()).toEqual([offered.handoffId, later.handoffId].sort());
    } finally {
      for (const agent of agents) await agent.close();
      await a.close();
      await b.close();
    }
  });
});
