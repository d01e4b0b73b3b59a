import type { ChannelPost, PostKind, Team, TeamsRecord } from "../../collab/contracts.js";
import type { KvBucket } from "../../broker/index.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import { AcpError, canonicalize, toErrorObject } from "../../protocol/index.js";
import type { Action } from "./intake.js";
import type { CollabServices } from "./services.js";
import { conflict, forbidden, notFound, sortableTime } from "../../collab/util.js";

export const TEAM_KEY = (teamId: string) => `t.${teamId}`;
export const POSTS_PREFIX = (teamId: string, channel: string) => `p.${teamId}.${channel}.`;

export async function loadTeam(bucket: KvBucket<TeamsRecord>, teamId: string): Promise<Team> {
  const team = (await bucket.get(TEAM_KEY(teamId)))?.value as Team | undefined;
  if (!team) throw notFound("team", teamId);
  return team;
}

/** Members only; everyone else is told the team does not exist (no probing of team ids). */
export async function memberTeam(
  bucket: KvBucket<TeamsRecord>,
  teamId: string,
  agentId: string,
): Promise<Team> {
  const team = await loadTeam(bucket, teamId);
  if (!team.members.includes(agentId)) throw notFound("team", teamId);
  return team;
}

/**
 * The copies of one channel message must go to exactly the other members (a sender alone in its
 * team addresses its single copy to itself, as a record), once each, and say the same thing.
 */
export function checkFanout(
  actions: Action<unknown>[],
  group: { name: string; members: string[] },
  sender: string,
): string[] {
  const expected = group.members.filter((m) => m !== sender);
  const wanted = expected.length > 0 ? expected : [sender];
  const recipients = actions.map((a) => a.headers["recipient-id"]);
  const seen = new Set<string>();
  recipients.forEach((to, i) => {
    const path = `/envelopes/${i}/params/headers/recipient-id`;
    if (!group.members.includes(to)) {
      throw new AcpError(
        "Forbidden",
        `${to} is not a member of ${group.name}; its messages go to members only`,
        {
          problems: [{ path, message: "not a member of the team" }],
        },
      );
    }
    if (seen.has(to) || !wanted.includes(to)) {
      throw new AcpError(
        "InvalidParams",
        `one copy per other member of ${group.name}: ${to} is ${seen.has(to) ? "repeated" : "the sender"}`,
        {
          problems: [{ path, message: seen.has(to) ? "repeated" : "must be another member" }],
        },
      );
    }
    seen.add(to);
  });
  const absent = wanted.filter((m) => !seen.has(m));
  if (absent.length > 0) {
    throw new AcpError(
      "InvalidParams",
      `a channel message goes to every member; missing copies for ${absent.join(", ")}`,
      {
        problems: [{ path: "/envelopes", message: `add copies for ${absent.join(", ")}` }],
        missing: absent,
      },
    );
  }
  const first = canonicalize((actions[0] as Action<unknown>).message.params.body);
  actions.forEach((a, i) => {
    if (canonicalize(a.message.params.body) !== first) {
      throw new AcpError("InvalidParams", "every copy of a channel message must carry the same body", {
        problems: [{ path: `/envelopes/${i}/params/body`, message: "differs from the first copy" }],
      });
    }
  });
  return wanted;
}

/**
 * Relays every copy through the gateway's relay (each a direct message, with the same guarantees).
 * Copies the relay refuses are reported; if none got through, the first refusal is the answer.
 */
export async function relayAll(
  services: CollabServices,
  caller: ResolvedAgent,
  actions: Action<unknown>[],
): Promise<Pick<ChannelPost, "delivered" | "failed">> {
  const delivered: Record<string, string> = {};
  const failed: Record<string, { code: number; message: string }> = {};
  let first: unknown;
  for (const action of actions) {
    const to = action.headers["recipient-id"];
    if (to === caller.record.agentId) continue;
    try {
      delivered[to] = (await services.intake.relay(caller, action)).id;
    } catch (err) {
      first ??= err;
      const { code, message } = toErrorObject(err);
      failed[to] = { code, message };
    }
  }
  if (first !== undefined && Object.keys(delivered).length === 0) throw first;
  return { delivered, failed };
}

/** Checks, relays and stores one channel post; the post id must be new. */
export async function postToChannel(
  services: CollabServices,
  bucket: KvBucket<TeamsRecord>,
  caller: ResolvedAgent,
  team: Team,
  channel: string,
  kind: PostKind,
  postId: string,
  actions: Action<unknown>[],
): Promise<ChannelPost> {
  checkFanout(actions, { name: `team ${team.teamId}`, members: team.members }, caller.record.agentId);
  const now = services.now();
  const key = `${POSTS_PREFIX(team.teamId, channel)}${sortableTime(now)}.${postId}`;
  const existing = await bucket.keys(POSTS_PREFIX(team.teamId, channel));
  if (existing.some((k) => k.endsWith(`.${postId}`))) throw conflict(`post ${postId} was already sent`);
  const first = actions[0] as Action<unknown>;
  const outcome = await relayAll(services, caller, actions);
  const post: ChannelPost = {
    postId,
    teamId: team.teamId,
    channel,
    kind,
    from: caller.record.agentId,
    at: first.headers.timestamp,
    body: first.message.params.body,
    ...outcome,
    envelope: first.message,
  };
  await bucket.create(key, post);
  return post;
}

export function requireOwner(team: Team, agentId: string): void {
  if (team.owner !== agentId)
    throw forbidden(`only ${team.owner}, the owner of team ${team.teamId}, may do this`);
}
