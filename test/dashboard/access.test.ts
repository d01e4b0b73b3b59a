import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import { Session } from "../../src/coordination/index.js";
import type { DashboardAgent, SessionDetail, SessionSummary } from "../../src/extensions/dashboard/index.js";
import type { PanelItem } from "../../src/gateway/panels.js";
import type { ApprovalRecord } from "../../src/orchestration/index.js";
import { type Action, Orchestrator } from "../../src/orchestration/index.js";
import { collabExtension } from "../../src/server.js";
import type { RestAnswer } from "../../src/wire/deprecated-names.js";
import {
  aliceAsksBob,
  type Cast,
  dashboard,
  followStream,
  principalToken,
  useCast,
} from "../helpers/dashboard.js";
import { api, startTestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

/** An approval asked by alice's scheduler (acting as an orchestrator) through the gateway's API. */
async function askApproval(c: Cast, action: Action = "EXECUTE"): Promise<ApprovalRecord> {
  const command = new Orchestrator({ id: "alice-scheduler", audit: false }).command({
    to: "bob-scheduler",
    action,
    parameters: { calendar: "team", when: "2026-02-18T10:00:00Z" },
  });
  const res = await api(c.gw.url, "/api/v1/approvals", {
    apiKey: c.alice.apiKey,
    body: { command, reason: "the command sets security.requireApproval", timeoutMs: 600_000 },
  });
  if (res.status !== 201) throw new Error(`approval: ${res.status} ${JSON.stringify(res.json)}`);
  return res.json as unknown as ApprovalRecord;
}

describe("what each principal sees (server-side, on every endpoint)", () => {
  const cast = useCast();

  it("agents: a principal sees its own with presence and handshake state per peer; the admin sees all", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const [alice, carol] = [await principalToken(c.gw, "alice"), await principalToken(c.gw, "carol")];
    const mine = (await dashboard(c.gw, alice, "/agents")).json.agents as RestAnswer<DashboardAgent>[];
    expect(mine.map((a) => a.agent_id)).toEqual(["alice-scheduler"]);
    expect(mine[0]).toMatchObject({
      principal_id: "alice",
      capabilities: ["calendar.read"],
      accepts_encryption: true,
      presence: { state: "online", connections: 1 },
      peers: [
        {
          peer: "bob-scheduler",
          peer_principal: "bob",
          handshake: "established",
          self: { announced: true, capabilities_exchanged: true, layers: [0, 1, 2] },
          peer_side: { announced: true, capabilities_exchanged: true, layers: [0, 1, 2] },
        },
      ],
    });
    // The camelCase names are still sent, for the deprecation period.
    expect(mine[0]).toMatchObject({
      agentId: "alice-scheduler",
      principalId: "alice",
      acceptsEncryption: true,
    });
    expect(mine[0]?.peers[0]?.peerSide).toEqual(mine[0]?.peers[0]?.peer_side);
    const carols = (await dashboard(c.gw, carol, "/agents")).json.agents as RestAnswer<DashboardAgent>[];
    expect(carols).toMatchObject([{ agent_id: "carol-agent", presence: { state: "offline" }, peers: [] }]);
    const all = (await dashboard(c.gw, c.gw.adminToken, "/agents")).json
      .agents as RestAnswer<DashboardAgent>[];
    expect(all.map((a) => a.agent_id)).toEqual(["alice-scheduler", "bob-scheduler", "carol-agent"]);
  });

  it("approvals: the principal asked (or owning the asking agent) sees and decides; others get 404", async () => {
    const c = await cast();
    const alice = await principalToken(c.gw, "alice");
    const bob = await principalToken(c.gw, "bob");
    const carol = await principalToken(c.gw, "carol");
    const stream = await followStream(c.gw, alice);
    const first = await askApproval(c);
    const second = await askApproval(c, "IMPLEMENT");
    await stream.next("changed", (d) => (d as { what: string }).what === "approvals");

    const listed = (await dashboard(c.gw, alice, "/approvals?status=pending")).json
      .approvals as ApprovalRecord[];
    expect(listed.map((a) => a.id)).toEqual([second.id, first.id]);
    expect((await dashboard(c.gw, bob, "/approvals")).json.approvals).toEqual([]);
    expect((await dashboard(c.gw, carol, "/approvals")).json.approvals).toEqual([]);

    const stolen = await dashboard(c.gw, carol, `/approvals/${first.id}/approve`, { method: "POST" });
    expect(stolen.status).toBe(404);
    expect(stolen.json.error).toMatchObject({ message: `no approval ${first.id}` });

    const approved = await dashboard(c.gw, alice, `/approvals/${first.id}/approve`, {
      body: { note: "fine by me" },
    });
    expect(approved.json).toMatchObject({
      status: "approved",
      decidedBy: "principal:alice",
      note: "fine by me",
    });
    const twice = await dashboard(c.gw, alice, `/approvals/${first.id}/deny`, { method: "POST" });
    expect(twice.status).toBe(409);
    const badNote = await dashboard(c.gw, alice, `/approvals/${second.id}/deny`, { body: { note: 42 } });
    expect(badNote.status).toBe(400);
    expect(badNote.json.error).toMatchObject({ data: { problems: [{ path: "/note" }] } });
    const denied = await dashboard(c.gw, c.gw.adminToken, `/approvals/${second.id}/deny`, { method: "POST" });
    expect(denied.json).toMatchObject({ status: "denied", decidedBy: "admin" });
    expect((await dashboard(c.gw, alice, "/approvals?status=pending")).json.approvals).toEqual([]);
    expect(((await dashboard(c.gw, alice, "/approvals")).json.approvals as unknown[]).length).toBe(2);
    const badStatus = await dashboard(c.gw, alice, "/approvals?status=maybe");
    expect(badStatus.json.error).toMatchObject({ data: { problems: [{ path: "status" }] } });
    stream.close();
  });

  it("coordination sessions: shown to principals whose agents take part", async () => {
    const c = await cast();
    const root = join(c.dir, "context");
    const session = await Session.create({ root, projectType: "scheduling" });
    await session.updateAgent("alice-scheduler", { status: "completed" });
    await session.updateAgent("reviewer", { status: "in_progress", dependencies: ["alice-scheduler"] });
    await session.log({
      timestamp: new Date().toISOString(),
      from: "reviewer",
      type: "status",
      message: "reviewing the plan",
    });
    await session.writeReport("alice-scheduler", { summary: "3 slots found", findings: [] });
    // One written with the coordination protocol's heredoc recipe, its $(date …) never run.
    writeFileSync(
      join(session.paths.reports, "reviewer.json"),
      `{"agent_name":"reviewer","timestamp":"'$(date -u +%Y-%m-%dT%H:%M:%SZ)'","status":"partial","summary":"half read"}`,
    );
    const [alice, carol] = [await principalToken(c.gw, "alice"), await principalToken(c.gw, "carol")];

    const list = (await dashboard(c.gw, alice, "/sessions")).json.sessions as RestAnswer<SessionSummary>[];
    expect(list).toEqual([
      {
        id: session.id,
        started_at: list[0]?.started_at,
        project_type: "scheduling",
        agents: 2,
        by_status: { completed: 1, in_progress: 1 },
        // The camelCase names are still sent, for the deprecation period; statuses are never renamed.
        startedAt: list[0]?.started_at,
        projectType: "scheduling",
        byStatus: { completed: 1, in_progress: 1 },
      },
    ]);
    const detail = (await dashboard(c.gw, alice, `/sessions/${session.id}`)).json as unknown as RestAnswer<
      Omit<SessionDetail, "agentList">
    > & { agent_list: SessionDetail["agentList"] };
    expect(detail.agent_list.map((a) => [a.name, a.status, a.dependencies])).toEqual([
      ["alice-scheduler", "completed", []],
      ["reviewer", "in_progress", ["alice-scheduler"]],
    ]);
    expect(detail.events).toMatchObject([
      { from: "reviewer", type: "status", message: "reviewing the plan" },
    ]);
    expect(detail.reports).toMatchObject([
      { agent: "alice-scheduler", status: "completed", summary: "3 slots found", findings: 0 },
      {
        agent: "reviewer",
        status: "partial",
        warnings: [expect.stringMatching(/^timestamp: is the shell's unexpanded \$\(date …\)/)],
      },
    ]);
    expect(detail.reports[0]?.warnings).toBeUndefined();
    expect(detail.unreadable_reports).toBe(0);

    expect((await dashboard(c.gw, carol, "/sessions")).json.sessions).toEqual([]);
    expect((await dashboard(c.gw, carol, `/sessions/${session.id}`)).status).toBe(404);
    expect((await dashboard(c.gw, alice, "/sessions/not-a-session")).status).toBe(404);
    expect(((await dashboard(c.gw, c.gw.adminToken, "/sessions")).json.sessions as unknown[]).length).toBe(1);
  });

  it("panels: handoffs are the viewer's; a module that is not installed is a 404", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    c.agents.get("bob-scheduler")!.onHandoff(() => ({ accepted: true }));
    await c.agents.get("alice-scheduler")!.handoff("bob-scheduler", {
      completed: ["found a slot"],
      remaining: "send the invitation",
      context: { slot: "2026-02-18T10:00:00Z" },
    });
    const [alice, carol] = [await principalToken(c.gw, "alice"), await principalToken(c.gw, "carol")];
    const handoffs = (await dashboard(c.gw, alice, "/panels/handoffs")).json.items as RestAnswer<PanelItem>[];
    expect(handoffs).toMatchObject([
      {
        title: "alice-scheduler → bob-scheduler",
        participants: ["alice-scheduler", "bob-scheduler"],
        message_id: expect.any(String),
        message_from: "alice-scheduler",
      },
    ]);
    // The camelCase names are still sent, for the deprecation period.
    expect(handoffs[0]).toMatchObject({ messageId: handoffs[0]?.message_id, messageFrom: "alice-scheduler" });
    expect(handoffs[0]!.lines?.[0]).toContain("handed bob-scheduler a task");
    expect((await dashboard(c.gw, carol, "/panels/handoffs")).json.items).toEqual([]);
    const missing = await dashboard(c.gw, alice, "/panels/disputes");
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatchObject({ message: "no dashboard panel disputes on this gateway" });
  });

  it("every endpoint refuses a request without a valid token", async () => {
    const c = await cast();
    const paths = [
      "/me",
      "/agents",
      "/feed",
      "/volume",
      "/messages/x",
      "/webhooks",
      "/approvals",
      "/sessions",
      "/panels/handoffs",
      "/stream",
    ];
    for (const path of paths) {
      expect((await dashboard(c.gw, undefined, path)).status, path).toBe(401);
      expect((await dashboard(c.gw, "acppr_forged", path)).status, path).toBe(401);
    }
    for (const path of ["/approvals/x/approve", "/approvals/x/deny", "/principals"]) {
      expect((await dashboard(c.gw, undefined, path, { method: "POST" })).status, path).toBe(401);
    }
  });

  it("a revoked principal's open stream ends", async () => {
    const c = await cast();
    const token = await principalToken(c.gw, "alice");
    const stream = await followStream(c.gw, token);
    await stream.next("ready");
    await dashboard(c.gw, c.gw.adminToken, "/principals/alice/revoke", { method: "POST" });
    await stream.ended;
    expect((await dashboard(c.gw, token, "/stream")).status).toBe(401);
  });
});

describe("stopping the gateway", () => {
  it("ends open streams instead of waiting for them", async () => {
    const gw = await startTestGateway();
    const stream = await followStream(gw, gw.adminToken);
    await stream.next("ready");
    // Would hang (and time out) if the stream's handler kept the request in flight.
    await gw.close();
    await stream.ended;
    expect((await fetch(`${gw.url}/healthz`).catch((err: Error) => err)) instanceof Error).toBe(true);
  });
});

describe("the dashboard page", () => {
  const tmp = useTmpDir();

  it("says how to build it when the bundle is missing, and serves no other files", async () => {
    const gw = await startTestGateway({ dashboard: { staticDir: tmp() } });
    try {
      const page = await fetch(`${gw.url}/`);
      expect(page.status).toBe(503);
      expect(await page.text()).toContain("npm run build");
      for (const path of ["/assets/..%2F..%2Fpackage.json", "/assets/missing.js", "/assets/x.exe"]) {
        expect((await fetch(`${gw.url}${path}`)).status, path).toBe(404);
      }
    } finally {
      await gw.close();
    }
  });
});

describe("collaboration panels (negotiations, handoffs, votes)", () => {
  const cast = useCast();

  it("show the collab module's records to the principals of the agents involved", async () => {
    const c = await cast();
    const collab = async (who: typeof c.alice) =>
      new CollabClient({
        agent: await c.connect(who),
        identity: who.identity,
        apiKey: who.apiKey,
        layers: [0, 1, 2],
      });
    const [alice, bob] = [await collab(c.alice), await collab(c.bob)];

    const proposed = await alice.negotiations.propose(
      "bob-scheduler",
      { slot: "2026-02-18T10:00:00Z", minutes: 60 },
      {
        subject: "weekly sync",
      },
    );
    await bob.negotiations.accept(proposed.sessionId);
    const offered = await alice.handoffs.offer(
      "bob-scheduler",
      {
        completed: ["agreed on a slot"],
        remaining: "send the invitation",
        context: { slot: "2026-02-18T10:00:00Z" },
      },
      { title: "send the invitation" },
    );
    await bob.handoffs.accept(offered.handoffId);
    await alice.teams.create("planning", "Planning", ["bob-scheduler"]);
    const vote = await alice.teams.openVote({
      teamId: "alice-scheduler.planning",
      channel: "general",
      question: "Move the sync to Thursday?",
      options: ["yes", "no"],
      rule: { type: "majority" },
      closesAt: new Date(Date.now() + 3_600_000),
    });
    await alice.teams.vote(vote.voteId, "yes");
    await bob.teams.vote(vote.voteId, "yes");

    const aliceToken = await principalToken(c.gw, "alice");
    const carolToken = await principalToken(c.gw, "carol");
    const panel = async (token: string, name: string) =>
      (await dashboard(c.gw, token, `/panels/${name}`)).json.items as PanelItem[];

    const [negotiation] = await panel(aliceToken, "negotiations");
    expect(negotiation).toMatchObject({
      title: "weekly sync: alice-scheduler ↔ bob-scheduler",
      status: "accepted",
      participants: ["alice-scheduler", "bob-scheduler"],
    });
    expect(negotiation!.lines).toEqual([
      'Round 1: alice-scheduler offered slot "2026-02-18T10:00:00Z", minutes 60',
      "Accepted by bob-scheduler",
      "Agreement signed by alice-scheduler and bob-scheduler: both signatures verify",
    ]);
    const handoffs = await panel(aliceToken, "handoffs");
    expect(handoffs).toHaveLength(1);
    expect(handoffs[0]).toMatchObject({
      title: "alice-scheduler → bob-scheduler: send the invitation",
      status: "accepted",
    });
    const [ballot] = await panel(aliceToken, "votes");
    expect(ballot).toMatchObject({ title: "Move the sync to Thursday?", status: "open" });
    expect(ballot!.lines?.[0]).toBe("yes: 2, no: 0 (2 of 2 voted)");

    for (const name of ["negotiations", "handoffs", "votes"])
      expect(await panel(carolToken, name)).toEqual([]);
  });
});

describe("an expired handoff on the handoffs panel", () => {
  let offset = 0;
  const cast = useCast({
    extensions: [collabExtension({ clock: () => new Date(Date.now() + offset), handoff: { sweepMs: 50 } })],
  });

  it("says the offer lapsed and its escrow went back to the delegator", async () => {
    offset = 0;
    const c = await cast();
    const grant = await api(c.gw.url, "/api/v1/ledger/grants", {
      headers: { authorization: `Bearer ${c.gw.adminToken}` },
      body: { agentId: "alice-scheduler", amount: 50 },
    });
    expect(grant.status, JSON.stringify(grant.json)).toBe(201);
    const alice = new CollabClient({
      agent: await c.connect(c.alice),
      identity: c.alice.identity,
      apiKey: c.alice.apiKey,
      layers: [0, 1, 2],
    });
    await c.connect(c.bob);
    const offered = await alice.handoffs.offer(
      "bob-scheduler",
      { completed: ["agreed on a slot"], remaining: "send the invitation", context: {} },
      { title: "send the invitation", escrow: 20 },
    );
    const token = await principalToken(c.gw, "alice");
    const panel = async () => (await dashboard(c.gw, token, "/panels/handoffs")).json.items as PanelItem[];
    expect((await panel())[0]).toMatchObject({ status: "offered" });
    expect((await panel())[0]!.lines).toContain(`Respond by ${offered.respondBy}`);

    offset = 25 * 3_600_000;
    const [expired] = await until(
      panel,
      (items) => items[0]?.status === "expired",
      "the panel shows the expiry",
    );
    expect(expired).toMatchObject({
      title: "alice-scheduler → bob-scheduler: send the invitation",
      participants: ["alice-scheduler", "bob-scheduler"],
    });
    expect(expired!.lines).toContain("20 credits in escrow, refunded to alice-scheduler");
    expect(expired!.lines?.at(-1)).toMatch(
      /^expired by gateway: .*was not answered by .*20 credits went back to alice-scheduler$/,
    );
    expect(
      (await dashboard(c.gw, await principalToken(c.gw, "carol"), "/panels/handoffs")).json.items,
    ).toEqual([]);
  });
});
