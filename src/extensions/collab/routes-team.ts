import { restRecord } from "../../wire/deprecated-names.js";
import type { ChannelPost, Team, TeamsRecord } from "../../collab/contracts.js";
import { authenticateAgent } from "../../gateway/context.js";
import { type Router, sendJson } from "../../http/server.js";
import { AcpError } from "../../protocol/index.js";
import { CollabMethod, TeamCreateBody, TeamMembersBody, TeamMessageBody } from "../../collab/messages.js";
import { auditParty, type CollabServices, liveAgent, readerOf } from "./services.js";
import { bucketOf, listValues, mutate } from "./store.js";
import { loadTeam, memberTeam, POSTS_PREFIX, postToChannel, requireOwner, TEAM_KEY } from "./teams.js";
import { conflict, notFound, requireOwnId, ShortName } from "../../collab/util.js";

const BASE = "/api/v1/teams";

/** Teams, their membership, and their channels. */
export function teamRoutes(router: Pick<Router, "add">, services: CollabServices): void {
  const { ctx, intake, audit } = services;
  const bucket = bucketOf<TeamsRecord>(ctx.broker, "teams");

  router.add("POST", BASE, async (req, res) => {
    const caller = await authenticateAgent(ctx, req);
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.teamCreate,
      body: TeamCreateBody,
      to: "self",
    });
    const { teamId, name } = action.body;
    requireOwnId(teamId, caller.record.agentId, "/params/body/teamId", "team");
    const members = [...new Set([caller.record.agentId, ...action.body.members])].sort();
    await Promise.all(
      members.map((m) => liveAgent(ctx, m, `/params/body/members/${action.body.members.indexOf(m)}`)),
    );
    const now = services.now().toISOString();
    const team: Team = {
      teamId,
      name,
      owner: caller.record.agentId,
      members,
      createdAt: now,
      updatedAt: now,
    };
    await mutate(bucket, TEAM_KEY(teamId), (current) => {
      // Only the caller's own team can be here (its namespace): telling it so reveals nothing.
      if (current) throw conflict(`team ${teamId} already exists`);
      return team;
    });
    audit.record({
      method: action.message.method,
      from: auditParty(caller.record),
      to: auditParty(caller.record),
      id: teamId,
      messageId: action.headers["message-id"],
      summary: `${caller.record.agentId} created team ${teamId} with ${members.join(", ")}.`,
    });
    sendJson(res, 201, restRecord(team));
  });

  router.add("POST", `${BASE}/:team_id/members`, async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const teamId = params.team_id as string;
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.teamMembers,
      body: TeamMembersBody,
      to: "self",
    });
    if (action.body.teamId !== teamId) {
      throw new AcpError("InvalidParams", `the message is about team ${action.body.teamId}, not ${teamId}`, {
        problems: [{ path: "/params/body/teamId", message: `must be ${teamId}` }],
      });
    }
    const { add, remove } = action.body;
    await Promise.all(add.map((m, i) => liveAgent(ctx, m, `/params/body/add/${i}`)));
    const me = caller.record.agentId;
    const { value } = await mutate(bucket, TEAM_KEY(teamId), (current) => {
      const team = current as Team | undefined;
      if (!team?.members.includes(me)) throw notFound("team", teamId);
      // Anyone may leave; only the owner adds or removes others, and the owner stays.
      const leavingOnly = add.length === 0 && remove.every((m) => m === me);
      if (!leavingOnly) requireOwner(team, me);
      if (remove.includes(team.owner)) throw conflict(`the owner ${team.owner} cannot leave team ${teamId}`);
      const members = [...new Set([...team.members, ...add])].filter((m) => !remove.includes(m)).sort();
      return { ...team, members, updatedAt: services.now().toISOString() };
    });
    audit.record({
      method: action.message.method,
      from: auditParty(caller.record),
      to: auditParty(caller.record),
      id: teamId,
      messageId: action.headers["message-id"],
      summary: `${me} changed team ${teamId}: added [${add.join(", ")}], removed [${remove.join(", ")}].`,
    });
    sendJson(res, 200, restRecord(value));
  });

  router.add("GET", BASE, async (req, res) => {
    const reader = await readerOf(ctx, req);
    const teams = (await listValues(bucket, "t.")) as Team[];
    sendJson(
      res,
      200,
      restRecord({
        teams: teams.filter((t) => reader.kind === "admin" || t.members.includes(reader.agentId)),
      }),
    );
  });

  router.add("GET", `${BASE}/:team_id`, async (req, res, params) => {
    const reader = await readerOf(ctx, req);
    const teamId = params.team_id as string;
    const team =
      reader.kind === "admin"
        ? await loadTeam(bucket, teamId)
        : await memberTeam(bucket, teamId, reader.agentId);
    sendJson(res, 200, restRecord(team));
  });

  router.add("POST", `${BASE}/:team_id/channels/:channel/messages`, async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const teamId = params.team_id as string;
    const channel = channelName(params.channel as string);
    const team = await memberTeam(bucket, teamId, caller.record.agentId);
    const actions = await intake.readMany(req, caller, {
      method: CollabMethod.teamMessage,
      body: TeamMessageBody,
      to: "any",
    });
    const body = (actions[0] as (typeof actions)[number]).body;
    if (body.teamId !== teamId || body.channel !== channel) {
      throw new AcpError(
        "InvalidParams",
        `the message is for ${body.teamId}/${body.channel}, not ${teamId}/${channel}`,
        {
          problems: [
            { path: "/envelopes/0/params/body/channel", message: `must be ${channel} of team ${teamId}` },
          ],
        },
      );
    }
    const post = await postToChannel(
      services,
      bucket,
      caller,
      team,
      channel,
      "message",
      body.postId,
      actions,
    );
    audit.record({
      method: CollabMethod.teamMessage,
      from: auditParty(caller.record),
      to: { agent: `team:${teamId}`, principal: null },
      id: post.postId,
      summary: `${caller.record.agentId} posted to ${teamId}/${channel}; delivered to ${Object.keys(post.delivered).length} member(s), refused for ${Object.keys(post.failed).length}.`,
    });
    sendJson(res, 202, restRecord(postView(post)));
  });

  router.add("GET", `${BASE}/:team_id/channels/:channel/messages`, async (req, res, params, url) => {
    const reader = await readerOf(ctx, req);
    const teamId = params.team_id as string;
    const channel = channelName(params.channel as string);
    if (reader.kind === "agent") await memberTeam(bucket, teamId, reader.agentId);
    else await loadTeam(bucket, teamId);
    const limit = Math.min(500, Math.max(1, Number(url.searchParams.get("limit") ?? 100) || 100));
    // A team named before ids had namespaces (`alice`) can share a key prefix with one of its creator's (`alice.crew`).
    const posts = ((await listValues(bucket, POSTS_PREFIX(teamId, channel))) as ChannelPost[]).filter(
      (p) => p.teamId === teamId && p.channel === channel,
    );
    sendJson(res, 200, restRecord({ teamId, channel, messages: posts.slice(-limit).map(postView) }));
  });
}

export function postView(post: ChannelPost): Omit<ChannelPost, "envelope"> {
  const { envelope: _signed, ...rest } = post;
  return rest;
}

function channelName(value: string): string {
  const parsed = ShortName.safeParse(value);
  if (!parsed.success) {
    throw new AcpError(
      "InvalidParams",
      `channel ${JSON.stringify(value)} ${parsed.error.issues[0]?.message}`,
      {
        problems: [{ path: "/channel", message: parsed.error.issues[0]?.message ?? "invalid" }],
      },
    );
  }
  return parsed.data;
}
