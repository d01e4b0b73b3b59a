/**
 * No existence oracles: what belongs to others answers exactly as what does not exist, and owners
 * and ids have namespaces, so nobody learns of, or squats, another's team, vote, task or message id.
 */
import { ListTasksRequest } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { afterEach, describe, expect, it } from "vitest";
import { CollabCore } from "../../src/client/collab-core.js";
import type { AcpAgent } from "../../src/client/index.js";
import { CollabMethod } from "../../src/collab/messages.js";
import { AcpError, buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { agentFor, eventually } from "../client/fixtures.js";
import { type GatewayFactory, type Member, useCollabBed } from "../helpers/collab-testbed.js";
import { sendRequest } from "../extensions/a2a/inbound-bed.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";

/** The refusal a promise ends with, as code and message (what a prober sees). */
async function answerOf(promise: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AcpError) return { code: err.code, message: err.message };
    return { code: 0, message: (err as Error).message };
  }
  throw new Error("expected a refusal");
}

function a2aClient(gw: TestGateway, agentId: string, bearer: string) {
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ authorization: `Bearer ${bearer}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
    }),
  ).createFromUrl(`${gw.url}/a2a/${agentId}/`);
}

/**
 * Ids a creator chooses (teams, votes, handoffs, knowledge entries, disputes, negotiations) are in
 * the creator's namespace, `<agent-id>.<id>`: mallory taking the names alice took creates her own
 * records; naming alice's ids answers as naming ids alice never used; alice's records are unchanged
 * and their participants still reach them. On both brokers (the KV writes differ).
 */
function creatorIdSuite(makeGateway: GatewayFactory): void {
  const bed = useCollabBed(makeGateway);
  const task = { completed: "nothing yet", remaining: "translate chapter 2", context: {} };
  const openVote = (who: Member, teamId: string, voteId: string) =>
    who.collab.teams.openVote({
      voteId,
      teamId,
      channel: "decisions",
      question: "Ship on Friday?",
      options: ["yes", "no"],
      rule: { type: "majority" },
      closesAt: new Date(Date.now() + 60_000),
    });

  it("a name another agent took is the caller's own; another's id answers as an id never used", async () => {
    const alice = await bed.member("alice");
    const bob = await bed.member("bob");
    const mallory = await bed.member("mallory");

    // alice's records, each under a name she chose.
    const team = await alice.collab.teams.create("crew", "Crew", ["bob"]);
    const vote = await openVote(alice, team.teamId, "vote-ship-friday");
    const entry = await alice.collab.teams.publish(team.teamId, {
      entryId: "runbook-0001",
      title: "Deploying",
      content: "blue-green",
    });
    const handoff = await alice.collab.handoffs.offer("bob", task, { handoffId: "invoice-0042" });
    const dispute = await alice.collab.teams.dispute(
      { kind: "handoff", id: handoff.handoffId },
      "late",
      {},
      "dispute-0001",
    );
    const session = await alice.collab.negotiations.propose(
      "bob",
      { price: 60 },
      { sessionId: "session-0001" },
    );
    expect([
      team.teamId,
      vote.voteId,
      entry.entryId,
      handoff.handoffId,
      dispute.disputeId,
      session.sessionId,
    ]).toEqual([
      "alice.crew",
      "alice.vote-ship-friday",
      "alice.runbook-0001",
      "alice.invoice-0042",
      "alice.dispute-0001",
      "alice.session-0001",
    ]);

    // mallory takes the same names: each is a record of her own (before, each answered 409 "already exists").
    const hers = await mallory.collab.teams.create("crew", "Mallory's crew", ["bob"]);
    expect(hers).toMatchObject({ teamId: "mallory.crew", owner: "mallory", members: ["bob", "mallory"] });
    expect(await openVote(mallory, hers.teamId, "vote-ship-friday")).toMatchObject({
      voteId: "mallory.vote-ship-friday",
      createdBy: "mallory",
    });
    expect(
      await mallory.collab.teams.publish(hers.teamId, {
        entryId: "runbook-0001",
        title: "Mine",
        content: "x",
      }),
    ).toMatchObject({ entryId: "mallory.runbook-0001", author: "mallory" });
    const herHandoff = await mallory.collab.handoffs.offer("bob", task, { handoffId: "invoice-0042" });
    expect(herHandoff).toMatchObject({ handoffId: "mallory.invoice-0042", delegator: "mallory" });
    expect(
      await mallory.collab.teams.dispute(
        { kind: "handoff", id: herHandoff.handoffId },
        "mine",
        {},
        "dispute-0001",
      ),
    ).toMatchObject({ disputeId: "mallory.dispute-0001", openedBy: "mallory" });
    expect(
      await mallory.collab.negotiations.propose("bob", { price: 1 }, { sessionId: "session-0001" }),
    ).toMatchObject({ sessionId: "mallory.session-0001" });

    // Naming alice's ids (the SDK leaves a named owner as it is) answers as naming ids alice never used.
    const probes: [string, (id: string) => Promise<unknown>, string, string][] = [
      ["team", (id) => mallory.collab.teams.create(id, "Crew"), team.teamId, "alice.crew-never"],
      ["vote", (voteId) => openVote(mallory, hers.teamId, voteId), vote.voteId, "alice.vote-never-opened"],
      [
        "entry",
        (entryId) => mallory.collab.teams.publish(hers.teamId, { entryId, title: "t", content: "c" }),
        entry.entryId,
        "alice.runbook-never",
      ],
      [
        "handoff",
        (handoffId) => mallory.collab.handoffs.offer("bob", task, { handoffId }),
        handoff.handoffId,
        "alice.invoice-never",
      ],
      [
        "dispute",
        (disputeId) =>
          mallory.collab.teams.dispute({ kind: "handoff", id: herHandoff.handoffId }, "x", {}, disputeId),
        dispute.disputeId,
        "alice.dispute-never",
      ],
      [
        "negotiation",
        (sessionId) => mallory.collab.negotiations.propose("bob", { price: 2 }, { sessionId }),
        session.sessionId,
        "alice.session-never",
      ],
    ];
    for (const [what, create, theirs, never] of probes) {
      const answer = await answerOf(create(theirs));
      const unused = await answerOf(create(never));
      expect({ what, ...answer }).toEqual({
        what,
        ...unused,
        message: unused.message.replace(never, theirs),
      });
      expect(answer.code, what).toBe(ErrorCode.InvalidParams);
    }

    // An id without its owner (the form that answered 409) is refused alike, taken or not.
    const core = new CollabCore({
      agent: mallory.agent,
      identity: mallory.test.identity,
      apiKey: mallory.test.apiKey,
    });
    const bare = async (teamId: string) => {
      const { message } = await core.sign(CollabMethod.teamCreate, "mallory", {
        teamId,
        name: "x",
        members: [],
      });
      return answerOf(core.call("POST", "/teams", message));
    };
    const taken = await bare("crew");
    const unused = await bare("crew-never");
    expect(taken).toEqual({ ...unused, message: unused.message.replaceAll("crew-never", "crew") });

    // Disputing alice's handoff reads as a handoff that does not exist (it answered "not involved").
    const disputing = async (id: string) => {
      const body = {
        disputeId: "mallory.dispute-probe",
        subject: { kind: "handoff", id },
        statement: "x",
        evidence: {},
      };
      const envelopes = await Promise.all(
        ["alice", "bob"].map(async (to) => (await core.sign(CollabMethod.disputeOpen, to, body)).message),
      );
      return answerOf(core.call("POST", "/disputes", { envelopes }));
    };
    const disputed = await disputing(handoff.handoffId);
    const absent = await disputing("alice.invoice-never");
    expect(disputed).toEqual({
      ...absent,
      message: absent.message.replace("alice.invoice-never", handoff.handoffId),
    });
    expect(disputed.code).toBe(ErrorCode.NotFound);

    // Unchanged, and healthy: alice's records are as she left them, and their participants act on them.
    expect(await bob.collab.teams.get("alice.crew")).toMatchObject({ owner: "alice", name: "Crew" });
    expect(await bob.collab.teams.getVote(vote.voteId)).toMatchObject({ createdBy: "alice", cast: 0 });
    expect(await bob.collab.teams.vote(vote.voteId, "yes")).toMatchObject({ changed: false });
    expect(await bob.collab.teams.entry(entry.entryId)).toMatchObject({
      author: "alice",
      title: "Deploying",
    });
    expect(await bob.collab.handoffs.accept(handoff.handoffId)).toMatchObject({
      delegator: "alice",
      status: "accepted",
    });
    expect(await bob.collab.teams.getDispute(dispute.disputeId)).toMatchObject({ openedBy: "alice" });
    expect(await bob.collab.negotiations.get(session.sessionId)).toMatchObject({
      proposer: { agentId: "alice" },
      status: "open",
    });
    expect((await alice.collab.teams.list()).map((t) => t.teamId)).toEqual(["alice.crew"]);
  });
}

describe("ids a creator chooses (embedded)", () => {
  creatorIdSuite((options) => startTestGateway(options));
});

describeWithNats("ids a creator chooses (NATS)", () => {
  const nats = useNatsServer();
  creatorIdSuite(async (options) => startTestGateway({ ...options, natsUrl: (await nats()).url }));
});

describe("votes of other teams", () => {
  const bed = useCollabBed((options) => startTestGateway(options));

  it("a ballot for another team's vote answers as for a vote that does not exist", async () => {
    const alice = await bed.member("alice");
    const bob = await bed.member("bob");
    const mallory = await bed.offline("mallory");
    await alice.collab.teams.create("crew", "Crew", ["bob"]);
    const { voteId } = await alice.collab.teams.openVote({
      voteId: "vote-ship-friday",
      teamId: "alice.crew",
      channel: "decisions",
      question: "Ship on Friday?",
      options: ["yes", "no"],
      rule: { type: "majority" },
      closesAt: new Date(Date.now() + 60_000),
    });
    expect(voteId).toBe("alice.vote-ship-friday");

    const theirs = await answerOf(mallory.collab.teams.vote(voteId, "yes"));
    const nobodys = await answerOf(mallory.collab.teams.vote("alice.vote-never-opened", "yes"));
    expect(theirs).toEqual({
      code: nobodys.code,
      message: nobodys.message.replace("never-opened", "ship-friday"),
    });
    expect(theirs.message).toBe("no vote alice.vote-ship-friday");

    // Unchanged, and healthy: no ballot was counted; the electorate still votes.
    expect((await bob.collab.teams.getVote(voteId)).cast).toBe(0);
    expect(await bob.collab.teams.vote(voteId, "no")).toMatchObject({ changed: false });
  });
});

describe("A2A task owners", () => {
  it("an agent named admin neither lists nor reads the admin's tasks", async () => {
    const gw = await startTestGateway();
    try {
      const helper = await gw.register("helper", "principal-helper", { capabilities: ["a2a"] });
      const agent = agentFor(gw, helper, `${gw.dataDir}/helper`);
      agent.onRequest((body) => ({ text: `echo: ${String(body.text)}` }));
      await agent.connect();
      const impostor = await gw.register("admin", "p-mallory");

      const asAdmin = await a2aClient(gw, "helper", gw.adminToken);
      const adminTask = await asAdmin.sendMessage(sendRequest("the admin's question"));
      const taskId = (adminTask as { id: string }).id;
      expect(taskId).toEqual(expect.any(String));

      const asAgent = await a2aClient(gw, "helper", impostor.apiKey);
      expect((await asAgent.listTasks(ListTasksRequest.fromJSON({}))).tasks).toEqual([]);
      const theirs = await answerOf(asAgent.getTask({ tenant: "", id: taskId, historyLength: undefined }));
      const nobodys = await answerOf(
        asAgent.getTask({ tenant: "", id: "00000000-0000-4000-8000-000000000000", historyLength: undefined }),
      );
      expect(theirs.message.replace(taskId, "ID")).toBe(
        nobodys.message.replace("00000000-0000-4000-8000-000000000000", "ID"),
      );

      // The admin still has it; the agent's own calls work.
      expect((await asAdmin.listTasks(ListTasksRequest.fromJSON({}))).tasks.map((t) => t.id)).toEqual([
        taskId,
      ]);
      await asAgent.sendMessage(sendRequest("the agent's own question"));
      expect((await asAgent.listTasks(ListTasksRequest.fromJSON({}))).tasks).toHaveLength(1);
      await agent.close();
    } finally {
      await gw.close();
    }
  });
});

/**
 * Message ids are per sender, on both brokers: an id another agent used first neither blocks nor
 * reveals anything, each sender's resubmission is still exactly-once, and a third agent settling
 * someone else's message is told what it would be told of an id never used.
 */
function messageIdSuite(start: () => Promise<TestGateway>): void {
  const tmp = useTmpDir("acp-message-ids-");
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined);
  });

  it("an id squatted by another sender blocks nothing and tells nothing; each sender's is exactly-once", async () => {
    const gw = await start();
    closing.push(() => gw.close());
    const dir = tmp();
    const connect = async (test: TestAgent): Promise<AcpAgent> => {
      const agent = agentFor(gw, test, `${dir}/${test.sender.agentId}`);
      await agent.connect();
      closing.push(() => agent.close());
      return agent;
    };
    const [alice, mallory, bob, gamma] = await Promise.all([
      gw.register("alice-agent", "p-alice"),
      gw.register("mallory-agent", "p-mallory"),
      gw.register("bob-agent", "p-bob"),
      gw.register("gamma-agent", "p-gamma"),
    ]);
    const received: string[] = [];
    const bobAgent = await connect(bob);
    bobAgent.onNotification((body, context) => {
      received.push(`${context.from}: ${String(body.who)}`);
    });
    for (const sender of [alice, mallory]) await (await connect(sender)).handshake("bob-agent");

    const id = "invoice-42-0001";
    const signed = (from: TestAgent, who: string) =>
      signMessage(
        buildNotification({ ...from.sender, layers: [0, 1] }, "bob-agent", { who }, { messageId: id }),
        from.signer,
      );
    const submit = (from: TestAgent, envelope: object) =>
      api(gw.url, "/api/v1/messages", { apiKey: from.apiKey, body: envelope });

    // Mallory takes alice's id first: it is mallory's own message under mallory's name.
    expect((await submit(mallory, signed(mallory, "mallory"))).json).toMatchObject({ id, duplicate: false });
    const alices = signed(alice, "alice");
    const first = await submit(alice, alices);
    expect([first.status, first.json]).toEqual([202, { id, status: "queued", duplicate: false }]);
    // Alice's resubmission is a duplicate (stored and delivered once); other content under it, a replay.
    expect((await submit(alice, alices)).json).toMatchObject({ id, duplicate: true });
    const replay = await submit(alice, signed(alice, "alice, changed"));
    expect((replay.json.error as { code: number }).code).toBe(-32005);

    await eventually(() => received.length === 2, "bob handled both messages");
    expect(received.sort()).toEqual(["alice-agent: alice", "mallory-agent: mallory"]);
    // Lookups in each agent's view: its own id by itself; a received one with its sender.
    const statusAs = async (who: TestAgent, query = "") =>
      (await api(gw.url, `/api/v1/messages/${id}/status${query}`, { apiKey: who.apiKey })).json;
    expect(await statusAs(alice)).toMatchObject({ from: "alice-agent" });
    expect(await statusAs(mallory)).toMatchObject({ from: "mallory-agent" });
    await eventually(
      async () => (await statusAs(bob, "?from=alice-agent")).status === "acknowledged",
      "bob acknowledged alice's",
    );
    await eventually(
      async () => (await statusAs(bob, "?from=mallory-agent")).status === "acknowledged",
      "bob acknowledged mallory's",
    );
    // Bob got this id from two senders: the id alone does not say which; 409 names `from`.
    const ambiguous = await api(gw.url, `/api/v1/messages/${id}/acknowledge`, {
      apiKey: bob.apiKey,
      method: "POST",
    });
    expect([ambiguous.status, ambiguous.json.error]).toMatchObject([
      409,
      { code: -32017, data: { problems: [{ path: "from" }] } },
    ]);

    expect(await statusAs(mallory, "?from=alice-agent")).toMatchObject({ error: { code: -32016 } });

    // A third agent settling alice's message over its socket: answered as for an id never used.
    const socket = await FrameClient.connect(gw.gateway.wsUrl, gamma.apiKey);
    await socket.next("ready");
    socket.send({ type: "reject", id, from: "alice-agent", reason: "probe" });
    socket.send({ type: "acknowledge", id: "never-used-0001", from: "alice-agent" });
    const theirs = await socket.next("error", (f) => f.id === id);
    const nobodys = await socket.next("error", (f) => f.id === "never-used-0001");
    expect(theirs.error).toEqual({
      ...nobodys.error,
      message: nobodys.error.message.replace("never-used-0001", id),
    });
    await socket.close();
    // And over REST: acknowledging it, or reading it, as for an id never used.
    const asGamma = async (path: string, method = "GET") =>
      (await api(gw.url, `/api/v1/messages/${path}`, { apiKey: gamma.apiKey, method })).json.error as {
        code: number;
        message: string;
      };
    for (const [theirsPath, nobodysPath, method] of [
      [`${id}/acknowledge?from=alice-agent`, "never-used-0001/acknowledge?from=alice-agent", "POST"],
      [`${id}/acknowledge`, "never-used-0001/acknowledge", "POST"],
      [`${id}?from=alice-agent`, "never-used-0001?from=alice-agent", "GET"],
    ] as const) {
      const theirs = await asGamma(theirsPath, method);
      const nobodys = await asGamma(nobodysPath, method);
      expect(theirs).toEqual({ ...nobodys, message: nobodys.message.replace("never-used-0001", id) });
      expect(theirs.code).toBe(-32016);
    }
    expect(await statusAs(alice)).toMatchObject({ status: "acknowledged" });
  });
}

describe("message ids per sender (embedded)", () => {
  messageIdSuite(() => startTestGateway());
});

describeWithNats("message ids per sender (NATS)", () => {
  const nats = useNatsServer();
  messageIdSuite(async () => startTestGateway({ natsUrl: (await nats()).url }));
});
