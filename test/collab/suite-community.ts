import { expect, it } from "vitest";
import type { StatusEvent } from "../../src/collab/index.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { api } from "../helpers/gateway.js";
import { rejection } from "./suite-negotiation.js";
import { type GatewayFactory, type Member, until, useCollabBed } from "../helpers/collab-testbed.js";

/** Knowledge sharing, dispute escalation and status broadcasting through a real gateway. */
export function communitySuite(makeGateway: GatewayFactory): void {
  const bed = useCollabBed(makeGateway);

  it("publishes knowledge, finds it by full-text search and tag, and credits its author once per user", async () => {
    const alice = await bed.member("alice");
    const bob = await bed.member("bob");
    const eve = await bed.member("eve");
    await alice.collab.teams.create("ops", "Operations", ["bob"]);
    await eve.collab.teams.create("other", "Elsewhere");
    const runbook = await alice.collab.teams.publish("alice.ops", {
      title: "Deploying the gateway",
      content: "Blue-green deployments keep the old gateway serving until the new one is healthy.",
      tags: ["deploy", "gateway"],
    });
    await bob.collab.teams.publish("alice.ops", {
      title: "Rotating API keys",
      content: "Rotate an agent's key with acp agent rotate; the old key stops working at once.",
      tags: ["security"],
    });
    await eve.collab.teams.publish("eve.other", {
      title: "Deploying elsewhere",
      content: "deployments of another team",
    });
    const titles = async (query: string, tag?: string) =>
      (await bob.collab.teams.search("alice.ops", query, tag ? { tag } : {})).map((h) => h.title);
    expect(await titles("deploy")).toEqual(["Deploying the gateway"]);
    expect(await titles("healthy gateway")).toEqual(["Deploying the gateway"]);
    expect(await titles("key rotate")).toEqual(["Rotating API keys"]);
    expect(await titles("", "security")).toEqual(["Rotating API keys"]);
    expect(await titles("kubernetes")).toEqual([]);
    const hit = (await bob.collab.teams.search("alice.ops", "blue green"))[0];
    expect(hit?.snippet).toMatch(/\[Blue\]-\[green\]/);
    expect((await rejection(eve.collab.teams.search("alice.ops", "deploy"))).code).toBe(ErrorCode.NotFound);

    expect(await bob.collab.teams.use(runbook.entryId, "followed it for the 1.2 release")).toMatchObject({
      credited: true,
      authorPoints: 1,
    });
    expect(await bob.collab.teams.use(runbook.entryId)).toMatchObject({ credited: false, authorPoints: 1 });
    expect(await alice.collab.teams.use(runbook.entryId)).toMatchObject({
      credited: false,
      reason: expect.stringMatching(/own entry/),
    });
    expect((await rejection(eve.collab.teams.use(runbook.entryId))).code).toBe(ErrorCode.NotFound);
    expect(await eve.collab.teams.points("alice")).toBe(1);
    await until(
      () => bob.collab.teams.search("alice.ops", "deploy"),
      (hits) => hits[0]?.uses === 1,
      "the index shows the use",
    );
  });

  it("escalates a dispute about a handoff to both principals with the evidence, until a principal resolves it", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["translate"]);
    const outsider = await bed.member("outsider");
    const handoff = await boss.collab.handoffs.offer(
      "worker",
      { completed: "nothing yet", remaining: "translate", context: {} },
      { requires: ["translate"] },
    );
    await worker.collab.handoffs.accept(handoff.handoffId);
    await worker.collab.handoffs.fail(handoff.handoffId, "gave up");
    const notices: string[] = [];
    worker.collab.on("dispute", (n) => notices.push(`${n.from}:${String(n.body.statement)}`));
    // An outsider cannot even see the handoff it would dispute.
    expect(
      (await rejection(outsider.collab.teams.dispute({ kind: "handoff", id: handoff.handoffId }, "not mine")))
        .code,
    ).toBe(ErrorCode.NotFound);
    const dispute = await boss.collab.teams.dispute(
      { kind: "handoff", id: handoff.handoffId },
      "The work was half done before it was failed.",
      { messageIds: [handoff.offer.messageId], note: "see the progress events" },
    );
    expect(dispute).toMatchObject({
      status: "open",
      openedBy: "boss",
      parties: ["boss", "worker"],
      escalatedTo: ["principal-boss", "principal-worker"],
    });
    expect(dispute.evidence.fromOpener.messageIds).toEqual([handoff.offer.messageId]);
    expect((dispute.evidence.snapshot.handoff as { status: string }).status).toBe("failed");
    await until(
      () => notices,
      (n) => n.length === 1,
      "the worker hears of the dispute",
    );
    expect(notices).toEqual(["boss:The work was half done before it was failed."]);

    const token = async (principalId: string) => {
      const r = await api(bed.gw.url, "/api/v1/dashboard/principals", {
        headers: { authorization: `Bearer ${bed.gw.adminToken}` },
        body: { principal_id: principalId },
      });
      expect(r.status, JSON.stringify(r.json)).toBe(201);
      return { authorization: `Bearer ${r.json.token as string}` };
    };
    const workerPrincipal = await token("principal-worker");
    const stranger = await token("principal-outsider");
    const listed = await api(bed.gw.url, "/api/v1/disputes?status=open", { headers: workerPrincipal });
    expect((listed.json.disputes as { disputeId: string }[]).map((d) => d.disputeId)).toEqual([
      dispute.disputeId,
    ]);
    expect(
      (await api(bed.gw.url, `/api/v1/disputes/${dispute.disputeId}`, { headers: stranger })).status,
    ).toBe(404);
    const byAgent = await api(bed.gw.url, `/api/v1/disputes/${dispute.disputeId}/resolve`, {
      apiKey: worker.test.apiKey,
      body: { resolution: "mine" },
    });
    expect(byAgent.status).toBe(403);
    const resolved = await api(bed.gw.url, `/api/v1/disputes/${dispute.disputeId}/resolve`, {
      headers: workerPrincipal,
      body: { resolution: "Half the escrow is paid by agreement." },
    });
    expect(resolved.json).toMatchObject({
      status: "resolved",
      resolution: { by: "principal:principal-worker" },
    });
    const again = await api(bed.gw.url, `/api/v1/disputes/${dispute.disputeId}/resolve`, {
      headers: workerPrincipal,
      body: { resolution: "again" },
    });
    expect(again.status).toBe(409);
    expect((await boss.collab.teams.getDispute(dispute.disputeId)).status).toBe("resolved");
  });

  it("broadcasts presence and signed status to subscribers: online, busy with load and tasks, offline", async () => {
    const watcher = await bed.member("watcher");
    const events: StatusEvent[] = [];
    const subscription = watcher.collab.subscribeStatus((e) => events.push(e), ["busy-bee"]);
    try {
      await subscription.ready;
      await until(
        () => events,
        (e) => e.length === 1,
        "the initial presence",
      );
      expect(events[0]).toMatchObject({
        type: "presence",
        agentId: "busy-bee",
        presence: { state: "offline" },
      });
      const bee: Member = await bed.member("busy-bee");
      await until(
        () => events,
        (e) => e.some((x) => x.type === "presence" && x.presence.state === "online"),
        "busy-bee online",
      );
      await bee.collab.publishStatus({
        state: "busy",
        load: 85,
        metrics: { responseTimeMs: 120, errorRate: 0.01 },
        tasks: [{ id: "task-1", title: "indexing", progress: 40 }],
        activeTasks: 1,
      });
      const status = await until(
        () => events.find((e) => e.type === "status"),
        (e) => e !== undefined,
        "the signed status",
      );
      expect(status).toMatchObject({
        type: "status",
        status: { agentId: "busy-bee", update: { state: "busy", load: 85 } },
      });
      const busy = await until(
        () => events.filter((e) => e.type === "presence").at(-1),
        (e) => e?.type === "presence" && e.presence.state === "busy",
        "presence busy",
      );
      expect(busy).toMatchObject({ presence: { load: 85, tasks: [{ id: "task-1", progress: 40 }] } });
      await bee.agent.close();
      await until(
        () => events.filter((e) => e.type === "presence").at(-1),
        (e) => e?.type === "presence" && e.presence.state === "offline",
        "busy-bee offline once its connection closed",
      );
      expect(events.every((e) => e.agentId === "busy-bee")).toBe(true);
    } finally {
      subscription.close();
    }
  });
}
