import { expect, it } from "vitest";
import type { CollabNotice } from "../../src/client/collab.js";
import { CollabCore } from "../../src/client/collab-core.js";
import { recount, type VoteRule } from "../../src/collab/index.js";
import { ErrorCode, importPublicKey } from "../../src/protocol/index.js";
import { rejection } from "./suite-negotiation.js";
import {
  auditSummaries,
  type CollabBed,
  type GatewayFactory,
  type Member,
  until,
  useCollabBed,
} from "../helpers/collab-testbed.js";

/** Collects the channel notices each member hears. */
function listen(members: Member[]): Map<string, CollabNotice[]> {
  const heard = new Map<string, CollabNotice[]>();
  for (const m of members) {
    heard.set(m.test.identity.agentId, []);
    m.collab.on("channel", (n) => heard.get(m.test.identity.agentId)?.push(n));
  }
  return heard;
}

async function crew(bed: CollabBed, names: string[]): Promise<Member[]> {
  const members = [];
  for (const name of names) members.push(await bed.member(name));
  await members[0]!.collab.teams.create("crew", "The crew", names.slice(1));
  return members;
}

/** Team channels and votes through a real gateway. */
export function teamSuite(makeGateway: GatewayFactory): void {
  const bed = useCollabBed(makeGateway);

  it("delivers a channel message to every member, signed per member, and to nobody else", async () => {
    const [alice, bob, carol] = await crew(bed, ["alice", "bob", "carol"]);
    const dave = await bed.member("dave");
    const heard = listen([alice!, bob!, carol!, dave]);
    const post = await alice!.collab.teams.post("alice.crew", "general", { text: "stand-up at 10" });
    expect(Object.keys(post.delivered).sort()).toEqual(["bob", "carol"]);
    expect(post.failed).toEqual({});
    await until(
      () => [...heard.values()].flat().length,
      (n) => n >= 2,
      "bob and carol hear it",
    );
    for (const name of ["bob", "carol"]) {
      expect(heard.get(name)?.map((n) => [n.method, n.from, n.body.text, n.context.messageId])).toEqual([
        ["agent.team.message", "alice", "stand-up at 10", post.delivered[name]],
      ]);
    }
    expect(heard.get("alice")).toEqual([]);
    expect(heard.get("dave")).toEqual([]);
    const history = await carol!.collab.teams.messages("alice.crew", "general");
    expect(history.map((p) => [p.from, p.body.text])).toEqual([["alice", "stand-up at 10"]]);

    // Membership is enforced on every side: outsiders cannot post, read or be addressed.
    expect(
      (await rejection(dave.collab.teams.post("alice.crew", "general", { text: "let me in" }))).code,
    ).toBe(ErrorCode.NotFound);
    expect((await rejection(dave.collab.teams.messages("alice.crew", "general"))).code).toBe(
      ErrorCode.NotFound,
    );
    const core = new CollabCore({
      agent: alice!.agent,
      identity: alice!.test.identity,
      apiKey: alice!.test.apiKey,
    });
    await core.reach("dave");
    const body = { teamId: "alice.crew", channel: "general", postId: "post-to-outsider-1", text: "psst" };
    const sneaky = await Promise.all(
      ["bob", "carol", "dave"].map(async (to) => (await core.sign("agent.team.message", to, body)).message),
    );
    const leak = await rejection(
      core.call("POST", "/teams/alice.crew/channels/general/messages", { envelopes: sneaky }),
    );
    expect(leak.code).toBe(ErrorCode.Forbidden);
    expect(leak.message).toMatch(/dave is not a member of team alice.crew/);
    const partial = await rejection(
      core.call("POST", "/teams/alice.crew/channels/general/messages", { envelopes: sneaky.slice(0, 1) }),
    );
    expect(partial.code).toBe(ErrorCode.InvalidParams);
    expect(partial.message).toMatch(/missing copies for carol/);
    expect(heard.get("dave")).toEqual([]);

    // Once carol leaves, she neither receives nor may post.
    await carol!.collab.teams.members("alice.crew", { remove: ["carol"] });
    const second = await alice!.collab.teams.post("alice.crew", "general", { text: "carol left" });
    expect(Object.keys(second.delivered)).toEqual(["bob"]);
    expect(
      (await rejection(carol!.collab.teams.post("alice.crew", "general", { text: "still here?" }))).code,
    ).toBe(ErrorCode.NotFound);
    const notOwner = await rejection(bob!.collab.teams.members("alice.crew", { add: ["dave"] }));
    expect(notOwner.code).toBe(ErrorCode.Forbidden);
  });

  it("a quorum vote reaches each outcome: no quorum, decided, undecided; the result is announced and recountable", async () => {
    const members = await crew(bed, ["alice", "bob", "carol", "dave"]);
    const [alice, bob, carol, dave] = members as [Member, Member, Member, Member];
    const heard = listen(members);
    const rule: VoteRule = { type: "quorum", quorum: 0.5 };
    const closesAt = new Date(Date.now() + 60_000);
    const open = (voteId: string) =>
      alice.collab.teams.openVote({
        voteId,
        teamId: "alice.crew",
        channel: "decisions",
        question: "Ship on Friday?",
        options: ["yes", "no"],
        rule,
        closesAt,
      });
    await open("alice.vote-no-quorum");
    await open("alice.vote-decided");
    await open("alice.vote-undecided");
    await open("alice.vote-forged");
    await until(
      () => heard.get("bob")?.filter((n) => n.method === "agent.vote.open").length ?? 0,
      (n) => n === 4,
      "bob hears four votes open",
    );

    await bob.collab.teams.vote("alice.vote-no-quorum", "yes");
    expect(await bob.collab.teams.vote("alice.vote-decided", "no")).toMatchObject({ changed: false });
    expect(await bob.collab.teams.vote("alice.vote-decided", "yes")).toMatchObject({
      changed: true,
      previous: "no",
    });
    await carol.collab.teams.vote("alice.vote-decided", "yes");
    await dave.collab.teams.vote("alice.vote-decided", "no");
    await bob.collab.teams.vote("alice.vote-undecided", "yes");
    await carol.collab.teams.vote("alice.vote-undecided", "no");
    const wrong = await rejection(carol.collab.teams.vote("alice.vote-decided", "maybe"));
    expect(wrong.data.problems).toEqual([{ path: "/params/body/option", message: "must be one of yes, no" }]);
    // No running tally while it is open, and no announcement before the end.
    expect((await bob.collab.teams.getVote("alice.vote-decided")).result).toBeUndefined();
    expect((await rejection(alice.collab.teams.announce("alice.vote-decided"))).message).toMatch(
      /is open until/,
    );

    bed.advance(61_000);
    expect((await rejection(dave.collab.teams.vote("alice.vote-undecided", "yes"))).message).toMatch(
      /closed at .*ballots are final/,
    );
    const outcomes = [];
    for (const id of ["alice.vote-no-quorum", "alice.vote-decided", "alice.vote-undecided"]) {
      const announced = await alice.collab.teams.announce(id);
      outcomes.push([
        id,
        announced.announced?.result.outcome,
        announced.announced?.result.winner,
        announced.announced?.result.tally,
      ]);
    }
    expect(outcomes).toEqual([
      ["alice.vote-no-quorum", "no-quorum", null, { yes: 1, no: 0 }],
      ["alice.vote-decided", "decided", "yes", { yes: 2, no: 1 }],
      ["alice.vote-undecided", "undecided", null, { yes: 1, no: 1 }],
    ]);
    expect(await auditSummaries(bed, "agent.vote.result")).toEqual([
      "the vote 'Ship on Friday?' closed: yes 1, no 0; no quorum",
      "the vote 'Ship on Friday?' closed: yes 2, no 1",
      "the vote 'Ship on Friday?' closed: yes 1, no 1; undecided",
    ]);
    await until(
      () => heard.get("dave")?.filter((n) => n.method === "agent.vote.result").length ?? 0,
      (n) => n === 3,
      "dave hears the results",
    );
    expect((await rejection(bob.collab.teams.announce("alice.vote-decided"))).message).toMatch(
      /already announced/,
    );
    // An announcement that is not the tally of the stored ballots is refused.
    const core = new CollabCore({ agent: bob.agent, identity: bob.test.identity, apiKey: bob.test.apiKey });
    const undecided = await bob.collab.teams.getVote("alice.vote-undecided");
    expect(undecided.announced).toBeDefined();
    const truth = (await bob.collab.teams.getVote("alice.vote-forged")).result!;
    const lie = {
      voteId: "alice.vote-forged",
      teamId: "alice.crew",
      channel: "decisions",
      postId: "forged-result-1",
      result: { ...truth, outcome: "decided", winner: "no" },
    };
    const copies = await Promise.all(
      ["alice", "carol", "dave"].map(async (to) => (await core.sign("agent.vote.result", to, lie)).message),
    );
    const falseResult = await rejection(
      core.call("POST", "/votes/alice.vote-forged/announce", { envelopes: copies }),
    );
    expect(falseResult.code).toBe(ErrorCode.InvalidParams);
    expect(falseResult.message).toBe("the announced result is not the tally of the signed ballots");

    // Anyone with the ballots and the voters' public keys can recount; a changed ballot does not verify.
    const decided = await dave.collab.teams.getVote("alice.vote-decided");
    const keys = new Map(members.map((m) => [m.test.signer.kid, importPublicKey(m.test.identity.signing)]));
    const resolve = (_agent: string, kid: string) => keys.get(kid);
    expect(recount(decided, decided.ballots ?? [], resolve)).toEqual(decided.announced?.result);
    const forged = structuredClone(decided.ballots ?? []);
    const ballot = forged.find((b) => b.voter === "dave")!;
    ballot.option = "yes";
    (ballot.envelope as { params: { body: { option: string } } }).params.body.option = "yes";
    expect(() => recount(decided, forged, resolve)).toThrow(
      /ballot \d of dave: the signature does not match/,
    );
  });

  it("applies majority, supermajority and unanimity, and keeps outsiders out of the electorate", async () => {
    const members = await crew(bed, ["alice", "bob", "carol"]);
    const [alice, bob, carol] = members as [Member, Member, Member];
    const closesAt = new Date(Date.now() + 60_000);
    const open = (voteId: string, rule: VoteRule, electorate?: string[]) =>
      alice.collab.teams.openVote({
        voteId,
        teamId: "alice.crew",
        channel: "decisions",
        question: "Which?",
        options: ["a", "b"],
        rule,
        closesAt,
        ...(electorate ? { electorate } : {}),
      });
    await open("alice.vote-majority", { type: "majority" });
    await open("alice.vote-super", { type: "supermajority", threshold: 0.75 });
    await open("alice.vote-unanimous", { type: "unanimity" }, ["alice", "bob"]);
    const outsider = await rejection(open("alice.vote-outsider", { type: "majority" }, ["alice", "zed"]));
    expect(outsider.message).toMatch(/zed are not/);
    for (const m of [alice, bob]) await m.collab.teams.vote("alice.vote-majority", "a");
    await carol.collab.teams.vote("alice.vote-majority", "b");
    for (const m of [alice, bob]) await m.collab.teams.vote("alice.vote-super", "a");
    await carol.collab.teams.vote("alice.vote-super", "b");
    for (const m of [alice, bob]) await m.collab.teams.vote("alice.vote-unanimous", "b");
    expect((await rejection(carol.collab.teams.vote("alice.vote-unanimous", "a"))).code).toBe(
      ErrorCode.Forbidden,
    );
    bed.advance(61_000);
    const result = async (id: string) => (await bob.collab.teams.getVote(id)).result;
    expect(await result("alice.vote-majority")).toMatchObject({ outcome: "decided", winner: "a" });
    expect(await result("alice.vote-super")).toMatchObject({
      outcome: "undecided",
      reason: "no option reached 75% of the ballots",
    });
    expect(await result("alice.vote-unanimous")).toMatchObject({
      outcome: "decided",
      winner: "b",
      electorate: 2,
    });
  });
}
