import { randomUUID } from "node:crypto";
import type { ChannelPost, Dispute, KnowledgeEntry, SearchHit, Team } from "../collab/contracts.js";
import type { HandoffView } from "../collab/handoff.js";
import { CollabMethod, type VoteResult, type VoteRule } from "../collab/messages.js";
import { ownId } from "../collab/util.js";
import type { Ballot, Vote } from "../collab/votes.js";
import { AcpError } from "../protocol/index.js";
import { type CollabCore, path } from "./collab-core.js";

export type PostView = Omit<ChannelPost, "envelope">;
export type VoteView = Vote & {
  status: "open" | "closed";
  cast: number;
  myBallot?: string;
  /** Once closed: the tally under the rule, and the signed ballots it counts. */
  result?: VoteResult;
  ballots?: Ballot[];
};

/** Teams, channels, votes, knowledge and disputes. Channel messages go to every member, signed per member. */
export class TeamClient {
  constructor(private readonly core: CollabCore) {}

  /**
   * Creates a team; its id is in this agent's namespace: `create("crew")` by alice makes `alice.crew`
   * (the returned `teamId`), which is how members address it.
   */
  async create(teamId: string, name: string, members: string[] = []): Promise<Team> {
    const { message } = await this.core.sign(CollabMethod.teamCreate, this.core.agentId, {
      teamId: ownId(this.core.agentId, teamId),
      name,
      members,
    });
    return this.core.call("POST", "/teams", message);
  }

  /** The owner adds or removes members; any member may remove itself. */
  async members(teamId: string, change: { add?: string[]; remove?: string[] }): Promise<Team> {
    const { message } = await this.core.sign(CollabMethod.teamMembers, this.core.agentId, {
      teamId,
      add: change.add ?? [],
      remove: change.remove ?? [],
    });
    return this.core.call("POST", `/teams/${path(teamId)}/members`, message);
  }

  get(teamId: string): Promise<Team> {
    return this.core.call("GET", `/teams/${path(teamId)}`);
  }

  async list(): Promise<Team[]> {
    return (await this.core.call<{ teams: Team[] }>("GET", "/teams")).teams;
  }

  /** Posts to a channel of the team: one signed copy per other member, each relayed like a direct message. */
  async post(
    teamId: string,
    channel: string,
    content: { text?: string; data?: Record<string, unknown> },
    postId: string = randomUUID(),
  ): Promise<PostView> {
    const team = await this.get(teamId);
    const envelopes = await this.fanout(CollabMethod.teamMessage, team.members, {
      teamId,
      channel,
      postId,
      ...content,
    });
    return this.core.call("POST", `/teams/${path(teamId)}/channels/${path(channel)}/messages`, { envelopes });
  }

  async messages(teamId: string, channel: string, limit = 100): Promise<PostView[]> {
    const url = `/teams/${path(teamId)}/channels/${path(channel)}/messages?limit=${limit}`;
    return (await this.core.call<{ messages: PostView[] }>("GET", url)).messages;
  }

  /** Opens a vote in a channel; `electorate` defaults to every member. */
  async openVote(definition: {
    teamId: string;
    channel: string;
    question: string;
    options: string[];
    rule: VoteRule;
    closesAt: Date | string;
    electorate?: string[];
    voteId?: string;
  }): Promise<Vote & { post: PostView }> {
    const team = await this.get(definition.teamId);
    const { closesAt, voteId, ...rest } = definition;
    const body = {
      ...rest,
      voteId: ownId(this.core.agentId, voteId ?? randomUUID()),
      closesAt: typeof closesAt === "string" ? closesAt : closesAt.toISOString(),
    };
    const envelopes = await this.fanout(CollabMethod.voteOpen, team.members, body);
    return this.core.call("POST", "/votes", { envelopes });
  }

  /** Casts (or changes) this agent's signed ballot. */
  async vote(voteId: string, option: string): Promise<{ voteId: string; option: string; changed: boolean }> {
    const { message } = await this.core.sign(CollabMethod.voteBallot, this.core.agentId, { voteId, option });
    return this.core.call("POST", `/votes/${path(voteId)}/ballots`, message);
  }

  getVote(voteId: string): Promise<VoteView> {
    return this.core.call("GET", `/votes/${path(voteId)}`);
  }

  /** After the period: announces the tally to the channel (the gateway checks it against the ballots). */
  async announce(voteId: string): Promise<Vote & { post: PostView }> {
    const vote = await this.getVote(voteId);
    if (vote.status !== "closed" || vote.result === undefined) {
      throw new AcpError(
        "Conflict",
        `vote ${voteId} is open until ${vote.closesAt}; results are announced after`,
      );
    }
    const team = await this.get(vote.teamId);
    const body = {
      voteId,
      teamId: vote.teamId,
      channel: vote.channel,
      postId: randomUUID(),
      result: vote.result,
    };
    const envelopes = await this.fanout(CollabMethod.voteResult, team.members, body);
    return this.core.call("POST", `/votes/${path(voteId)}/announce`, { envelopes });
  }

  async publish(
    teamId: string,
    entry: { title: string; content: string; tags?: string[]; entryId?: string },
  ): Promise<Omit<KnowledgeEntry, "envelope">> {
    const { message } = await this.core.sign(CollabMethod.knowledgePublish, this.core.agentId, {
      teamId,
      entryId: ownId(this.core.agentId, entry.entryId ?? randomUUID()),
      title: entry.title,
      content: entry.content,
      tags: entry.tags ?? [],
    });
    return this.core.call("POST", `/teams/${path(teamId)}/knowledge`, message);
  }

  async search(
    teamId: string,
    query: string,
    options: { tag?: string; limit?: number } = {},
  ): Promise<SearchHit[]> {
    const params = new URLSearchParams({ q: query });
    if (options.tag) params.set("tag", options.tag);
    if (options.limit) params.set("limit", String(options.limit));
    return (
      await this.core.call<{ results: SearchHit[] }>("GET", `/teams/${path(teamId)}/knowledge?${params}`)
    ).results;
  }

  entry(entryId: string): Promise<KnowledgeEntry> {
    return this.core.call("GET", `/knowledge/${path(entryId)}`);
  }

  /** Records that this agent used an entry: its author earns a point (once per agent and entry). */
  async use(
    entryId: string,
    note?: string,
  ): Promise<{ credited: boolean; reason: string; authorPoints: number }> {
    const { message } = await this.core.sign(CollabMethod.knowledgeUse, this.core.agentId, {
      entryId,
      ...(note ? { note } : {}),
    });
    return this.core.call("POST", `/knowledge/${path(entryId)}/use`, message);
  }

  async points(agentId: string = this.core.agentId): Promise<number> {
    return (await this.core.call<{ points: number }>("GET", `/knowledge/points/${path(agentId)}`)).points;
  }

  /** Opens a dispute about a handoff or a vote: sent to everyone involved, escalated to their principals. */
  async dispute(
    subject: { kind: "handoff" | "vote"; id: string },
    statement: string,
    evidence: { messageIds?: string[]; note?: string; data?: Record<string, unknown> } = {},
    disputeId: string = randomUUID(),
  ): Promise<Dispute> {
    const parties = await this.partiesOf(subject);
    const body = {
      disputeId: ownId(this.core.agentId, disputeId),
      subject,
      statement,
      evidence: { messageIds: [], ...evidence },
    };
    const envelopes = await this.fanout(CollabMethod.disputeOpen, parties, body);
    return this.core.call("POST", "/disputes", { envelopes });
  }

  getDispute(disputeId: string): Promise<Dispute> {
    return this.core.call("GET", `/disputes/${path(disputeId)}`);
  }

  /** The same body signed once for each other member (or once to itself when it is alone). */
  private async fanout(method: string, members: string[], body: Record<string, unknown>): Promise<unknown[]> {
    const others = members.filter((m) => m !== this.core.agentId);
    const recipients = others.length > 0 ? others : [this.core.agentId];
    await Promise.all(recipients.map((r) => this.core.reach(r)));
    return Promise.all(recipients.map(async (r) => (await this.core.sign(method, r, body)).message));
  }

  /** Who the gateway counts as involved: the same rule it applies (see routes-dispute.ts). */
  private async partiesOf(subject: { kind: "handoff" | "vote"; id: string }): Promise<string[]> {
    if (subject.kind === "handoff") {
      const h = await this.core.call<HandoffView>("GET", `/handoffs/${path(subject.id)}`);
      return [h.delegator, h.delegate];
    }
    const vote = await this.getVote(subject.id);
    const team = await this.get(vote.teamId).catch(() => undefined);
    return [...new Set([...vote.electorate, vote.createdBy, ...(team?.members ?? [])])];
  }
}
