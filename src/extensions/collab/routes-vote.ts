import { restRecord } from "../../wire/deprecated-names.js";
import type { Team, TeamsRecord } from "../../collab/contracts.js";
import type { IncomingMessage } from "node:http";
import { summaryOf } from "../../audit/index.js";
import { authenticateAgent } from "../../gateway/context.js";
import { type Router, sendJson } from "../../http/server.js";
import { AcpError, canonicalize } from "../../protocol/index.js";
import { CollabMethod, VoteBallotBody, VoteOpenBody, VoteResultBody } from "../../collab/messages.js";
import { postView } from "./routes-team.js";
import { auditParty, type CollabServices, readerOf } from "./services.js";
import { ballotsOf, bucketOf, listValues, mutate } from "./store.js";
import { loadTeam, memberTeam, postToChannel } from "./teams.js";
import { conflict, forbidden, notFound, requireOwnId } from "../../collab/util.js";
import { BALLOT_KEY, type Ballot, isClosed, tallyVote, VOTE_KEY, type Vote } from "../../collab/votes.js";

const BASE = "/api/v1/votes";
const MAX_PERIOD_MS = 30 * 24 * 3_600_000;

/** Votes: opened and announced in a team channel, ballots signed by each voter. */
export function voteRoutes(router: Pick<Router, "add">, services: CollabServices): void {
  const { ctx, intake, audit } = services;
  const votes = bucketOf<Vote | Ballot>(ctx.broker, "votes");
  const teams = bucketOf<TeamsRecord>(ctx.broker, "teams");

  /** The vote, for members of its team (the admin sees all). */
  const load = async (
    req: IncomingMessage,
    voteId: string,
  ): Promise<{ vote: Vote; viewer: string | null }> => {
    const reader = await readerOf(ctx, req);
    const vote = (await votes.get(VOTE_KEY(voteId)))?.value as Vote | undefined;
    if (!vote) throw notFound("vote", voteId);
    if (reader.kind === "admin") return { vote, viewer: null };
    const team = await loadTeam(teams, vote.teamId).catch(() => undefined);
    if (!team?.members.includes(reader.agentId) && !vote.electorate.includes(reader.agentId))
      throw notFound("vote", voteId);
    return { vote, viewer: reader.agentId };
  };

  router.add("POST", BASE, async (req, res) => {
    const caller = await authenticateAgent(ctx, req);
    const actions = await intake.readMany(req, caller, {
      method: CollabMethod.voteOpen,
      body: VoteOpenBody,
      to: "any",
    });
    const body = (actions[0] as (typeof actions)[number]).body;
    requireOwnId(body.voteId, caller.record.agentId, "/envelopes/0/params/body/voteId", "vote");
    const team: Team = await memberTeam(teams, body.teamId, caller.record.agentId);
    const electorate = [...new Set(body.electorate ?? team.members)].sort();
    const outsiders = electorate.filter((m) => !team.members.includes(m));
    if (outsiders.length > 0) {
      throw new AcpError(
        "InvalidParams",
        `the electorate must be members of ${team.teamId}: ${outsiders.join(", ")} are not`,
        {
          problems: [
            { path: "/envelopes/0/params/body/electorate", message: `${outsiders.join(", ")} not members` },
          ],
        },
      );
    }
    const now = services.now();
    const closes = Date.parse(body.closesAt);
    if (closes <= now.getTime() || closes - now.getTime() > MAX_PERIOD_MS) {
      throw new AcpError("InvalidParams", "closesAt must be in the future and within 30 days", {
        problems: [
          { path: "/envelopes/0/params/body/closesAt", message: "must be in the future and within 30 days" },
        ],
      });
    }
    if (await votes.get(VOTE_KEY(body.voteId))) throw conflict(`vote ${body.voteId} already exists`);
    const vote: Vote = {
      voteId: body.voteId,
      teamId: team.teamId,
      channel: body.channel,
      question: body.question,
      options: body.options,
      electorate,
      rule: body.rule,
      createdBy: caller.record.agentId,
      createdAt: now.toISOString(),
      closesAt: new Date(closes).toISOString(),
    };
    const post = await postToChannel(
      services,
      teams,
      caller,
      team,
      body.channel,
      "vote.open",
      body.voteId,
      actions,
    );
    await votes.create(VOTE_KEY(vote.voteId), vote);
    audit.record({
      method: CollabMethod.voteOpen,
      from: auditParty(caller.record),
      to: { agent: `team:${team.teamId}`, principal: null },
      id: vote.voteId,
      summary: `${caller.record.agentId} opened vote ${vote.voteId} (${vote.rule.type}) in ${team.teamId}/${vote.channel} until ${vote.closesAt}.`,
    });
    sendJson(res, 201, restRecord({ ...vote, post: postView(post) }));
  });

  router.add("POST", `${BASE}/:vote_id/ballots`, async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const voteId = params.vote_id as string;
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.voteBallot,
      body: VoteBallotBody,
      to: "self",
    });
    if (action.body.voteId !== voteId) {
      throw new AcpError("InvalidParams", `the ballot is for vote ${action.body.voteId}, not ${voteId}`, {
        problems: [{ path: "/params/body/voteId", message: `must be ${voteId}` }],
      });
    }
    const vote = (await votes.get(VOTE_KEY(voteId)))?.value as Vote | undefined;
    const voter = caller.record.agentId;
    if (!vote) throw notFound("vote", voteId);
    if (!vote.electorate.includes(voter)) {
      // Only who may see the vote (its team's members) learns that it exists.
      const team = await loadTeam(teams, vote.teamId).catch(() => undefined);
      if (!team?.members.includes(voter)) throw notFound("vote", voteId);
      throw forbidden(`${voter} is not in the electorate of vote ${voteId}`);
    }
    if (isClosed(vote, services.now()))
      throw conflict(`vote ${voteId} closed at ${vote.closesAt}; ballots are final`);
    if (!vote.options.includes(action.body.option)) {
      throw new AcpError(
        "InvalidParams",
        `option ${JSON.stringify(action.body.option)} is not on the ballot`,
        {
          problems: [{ path: "/params/body/option", message: `must be one of ${vote.options.join(", ")}` }],
        },
      );
    }
    const ballot: Ballot = {
      voteId,
      voter,
      option: action.body.option,
      messageId: action.headers["message-id"],
      at: action.headers.timestamp,
      envelope: action.message,
    };
    let previous: string | undefined;
    await mutate(votes, BALLOT_KEY(voteId, voter), (current) => {
      previous = (current as Ballot | undefined)?.option;
      return ballot;
    });
    audit.record({
      method: CollabMethod.voteBallot,
      from: auditParty(caller.record),
      to: auditParty(caller.record),
      id: voteId,
      messageId: ballot.messageId,
      summary: `${voter} ${previous === undefined ? "cast" : "changed"} a ballot in vote ${voteId}.`,
    });
    sendJson(
      res,
      200,
      restRecord({
        voteId,
        voter,
        option: ballot.option,
        changed: previous !== undefined,
        previous: previous ?? null,
      }),
    );
  });

  router.add("GET", BASE, async (req, res, _params, url) => {
    const reader = await readerOf(ctx, req);
    const team = url.searchParams.get("team");
    const all = ((await listValues(votes, "v.")) as Vote[]).filter((v) => team === null || v.teamId === team);
    const memberOf = new Map<string, boolean>();
    const visible: Vote[] = [];
    for (const vote of all) {
      if (reader.kind === "agent" && !memberOf.has(vote.teamId)) {
        const t = await loadTeam(teams, vote.teamId).catch(() => undefined);
        memberOf.set(vote.teamId, t?.members.includes(reader.agentId) ?? false);
      }
      if (reader.kind === "admin" || memberOf.get(vote.teamId)) visible.push(vote);
    }
    const now = services.now();
    sendJson(
      res,
      200,
      restRecord({
        votes: visible.map((v) => ({ ...v, status: isClosed(v, now) ? "closed" : "open" })),
      }),
    );
  });

  router.add("GET", `${BASE}/:vote_id`, async (req, res, params) => {
    const { vote, viewer } = await load(req, params.vote_id as string);
    const ballots = await ballotsOf(votes, vote.voteId);
    const closed = isClosed(vote, services.now());
    const mine = ballots.find((b) => b.voter === viewer);
    sendJson(
      res,
      200,
      restRecord({
        ...vote,
        status: closed ? "closed" : "open",
        cast: ballots.length,
        ...(mine ? { myBallot: mine.option } : {}),
        // Ballots and the tally are shown once voting closed, so nobody votes by the running count.
        ...(closed ? { result: tallyVote(vote, ballots), ballots } : {}),
      }),
    );
  });

  router.add("POST", `${BASE}/:vote_id/announce`, async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const voteId = params.vote_id as string;
    const actions = await intake.readMany(req, caller, {
      method: CollabMethod.voteResult,
      body: VoteResultBody,
      to: "any",
    });
    const body = (actions[0] as (typeof actions)[number]).body;
    const vote = (await votes.get(VOTE_KEY(voteId)))?.value as Vote | undefined;
    if (!vote || body.voteId !== voteId) throw notFound("vote", voteId);
    const team = await memberTeam(teams, vote.teamId, caller.record.agentId);
    if (!isClosed(vote, services.now())) throw conflict(`vote ${voteId} is open until ${vote.closesAt}`);
    if (vote.announced)
      throw conflict(`the result of vote ${voteId} was already announced by ${vote.announced.by}`);
    if (body.teamId !== vote.teamId || body.channel !== vote.channel) {
      throw new AcpError("InvalidParams", `announce in ${vote.teamId}/${vote.channel}`, {
        problems: [
          { path: "/envelopes/0/params/body/channel", message: `must be ${vote.channel} of ${vote.teamId}` },
        ],
      });
    }
    const result = tallyVote(vote, await ballotsOf(votes, voteId));
    for (const action of actions) action.summaryContext = { question: vote.question };
    if (canonicalize(body.result) !== canonicalize(result)) {
      throw new AcpError("InvalidParams", "the announced result is not the tally of the signed ballots", {
        problems: [{ path: "/envelopes/0/params/body/result", message: "does not match the tally" }],
        expected: result,
      });
    }
    const post = await postToChannel(
      services,
      teams,
      caller,
      team,
      vote.channel,
      "vote.result",
      body.postId,
      actions,
    );
    const { value } = await mutate(votes, VOTE_KEY(voteId), (current) => {
      const stored = current as Vote;
      if (stored.announced) throw conflict(`the result of vote ${voteId} was already announced`);
      return {
        ...stored,
        announced: { by: caller.record.agentId, at: post.at, postId: post.postId, result },
      };
    });
    // The sentence every member's relayed copy has too: "the vote 'Ship on Friday?' closed: yes 3, no 0".
    const summary = summaryOf((actions[0] as (typeof actions)[number]).message, {
      context: { question: vote.question },
    });
    audit.record({
      method: CollabMethod.voteResult,
      from: auditParty(caller.record),
      to: { agent: `team:${team.teamId}`, principal: null },
      id: voteId,
      summary: summary.text,
      ...(summary.by === "sender" ? { summaryBy: "sender" as const } : {}),
    });
    sendJson(res, 200, restRecord({ ...value, post: postView(post) }));
  });
}
