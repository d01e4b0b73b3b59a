import { z } from "zod";
import { PresenceUpdate } from "../wire/api.js";
import { AgentId, HandoffBody } from "../protocol/index.js";
import { CollabId, JsonObject, ShortName, TeamId } from "./util.js";

/**
 * The ACP messages of collaboration: extension methods (`agent.<domain>.<action>`) whose bodies
 * are defined here, shared by the gateway (which checks them) and the SDK (which builds them).
 * A task offer is the ACP core protocol's own `agent.handoff` with a `task` member added to its body.
 */
export const CollabMethod = {
  propose: "agent.negotiation.propose",
  counter: "agent.negotiation.counter",
  accept: "agent.negotiation.accept",
  reject: "agent.negotiation.reject",
  handoffOffer: "agent.handoff",
  handoffAccept: "agent.handoff.accept",
  handoffDecline: "agent.handoff.decline",
  handoffComplete: "agent.handoff.complete",
  handoffFail: "agent.handoff.fail",
  handoffCancel: "agent.handoff.cancel",
  handoffProgress: "agent.handoff.progress",
  handoffExpired: "agent.handoff.expired",
  teamCreate: "agent.team.create",
  teamMembers: "agent.team.members",
  teamMessage: "agent.team.message",
  voteOpen: "agent.vote.open",
  voteBallot: "agent.vote.ballot",
  voteResult: "agent.vote.result",
  knowledgePublish: "agent.knowledge.publish",
  knowledgeUse: "agent.knowledge.use",
  disputeOpen: "agent.dispute.open",
  status: "agent.status",
} as const;

const Hash = z.string().regex(/^[A-Za-z0-9_-]{43}$/, "must be a base64url SHA-256");
const Signature = z
  .string()
  .regex(/^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$/, "must be a detached compact JWS (header..signature)");

/** An offer (the proposal is round 1, counters follow), signed as the agreement it would become. */
export const OfferBody = z.strictObject({
  sessionId: CollabId,
  subject: z.string().min(1).max(500).optional(),
  round: z.int().positive(),
  terms: JsonObject,
  historyHash: Hash,
  agreementSignature: Signature,
});
export type OfferBody = z.infer<typeof OfferBody>;

export const AcceptBody = z.strictObject({
  sessionId: CollabId,
  round: z.int().positive(),
  historyHash: Hash,
  agreementSignature: Signature,
});
export type AcceptBody = z.infer<typeof AcceptBody>;

export const RejectBody = z.strictObject({
  sessionId: CollabId,
  reason: z.string().min(1).max(2000).optional(),
});
export type RejectBody = z.infer<typeof RejectBody>;

export const HandoffTask = z.strictObject({
  handoffId: CollabId,
  title: z.string().min(1).max(500).optional(),
  /** Capabilities the delegate must have registered; checked before the offer is delivered. */
  requires: z.array(z.string().min(1).max(128)).max(32).default([]),
  /** Credits held in escrow for the delegate (0: none). */
  escrow: z.int("must be a whole number of credits").nonnegative().max(1_000_000_000).default(0),
  /** The offer expires unless accepted or declined by then (default: the gateway's, 24 hours). */
  respondBy: z.iso.datetime({ offset: true, message: "must be an ISO 8601 date-time" }).optional(),
  /** The accepted task expires unless completed by then (default: the gateway's, 7 days after acceptance). */
  deadline: z.iso.datetime({ offset: true, message: "must be an ISO 8601 date-time" }).optional(),
});
export type HandoffTask = z.infer<typeof HandoffTask>;

export const HandoffOfferBody = HandoffBody.extend({ task: HandoffTask }).strict();
export type HandoffOfferBody = z.infer<typeof HandoffOfferBody>;

export const HandoffActionBody = z.strictObject({
  handoffId: CollabId,
  reason: z.string().min(1).max(2000).optional(),
  result: z.unknown().optional(),
});
export type HandoffActionBody = z.infer<typeof HandoffActionBody>;

/**
 * The principal of the gateway's collaboration agent, which signs what the gateway decided by itself
 * (a handoff's expiry). Registering an agent for it takes the admin token, and no other agent's
 * message can claim it (principal binding), so a notice from any other principal is not the gateway's.
 */
export const GATEWAY_COLLAB_PRINCIPAL = "acp-gateway-collab";

/**
 * What the gateway tells both parties when a handoff expired (its collaboration agent signs it):
 * an offer nobody answered by `respondBy`, or an accepted task not completed by its `deadline`.
 */
export const HandoffExpiredBody = z.strictObject({
  handoffId: CollabId,
  title: z.string().optional(),
  delegator: AgentId,
  delegate: AgentId,
  /** What expired: the offer (never answered) or the accepted task (not completed in time). */
  expired: z.enum(["offer", "task"]),
  /** The time that passed: the offer's respondBy or the task's deadline. */
  due: z.iso.datetime({ offset: true }),
  /** Credits given back to the delegator from the escrow (0: none). */
  refunded: z.int().nonnegative(),
});
export type HandoffExpiredBody = z.infer<typeof HandoffExpiredBody>;

export const HandoffProgressBody = z.strictObject({
  handoffId: CollabId,
  progress: z.number().min(0).max(100),
  note: z.string().max(500).optional(),
});
export type HandoffProgressBody = z.infer<typeof HandoffProgressBody>;

export const TeamCreateBody = z.strictObject({
  teamId: TeamId,
  name: z.string().min(1).max(200),
  members: z.array(AgentId).max(256).default([]),
});
export type TeamCreateBody = z.infer<typeof TeamCreateBody>;

export const TeamMembersBody = z.strictObject({
  teamId: TeamId,
  add: z.array(AgentId).max(256).default([]),
  remove: z.array(AgentId).max(256).default([]),
});
export type TeamMembersBody = z.infer<typeof TeamMembersBody>;

export const TeamMessageBody = z
  .strictObject({
    teamId: TeamId,
    channel: ShortName,
    postId: CollabId,
    text: z.string().min(1).max(16_000).optional(),
    data: JsonObject.optional(),
  })
  .refine((b) => b.text !== undefined || b.data !== undefined, {
    message: "needs text or data",
    path: ["text"],
  });
export type TeamMessageBody = z.infer<typeof TeamMessageBody>;

export const VoteRuleType = z.enum(["majority", "supermajority", "unanimity", "quorum"]);
export const VoteRule = z.strictObject({
  type: VoteRuleType,
  /** supermajority: share of the ballots cast the winner needs (default 2/3). */
  threshold: z.number().gt(0.5).max(1).optional(),
  /** quorum: share of the electorate that must vote (default 1/2). */
  quorum: z.number().gt(0).max(1).optional(),
});
export type VoteRule = z.infer<typeof VoteRule>;

export const VoteOpenBody = z.strictObject({
  voteId: CollabId,
  teamId: TeamId,
  channel: ShortName,
  question: z.string().min(1).max(2000),
  options: z
    .array(z.string().min(1).max(200))
    .min(2, "needs at least two options")
    .max(20)
    .refine((o) => new Set(o).size === o.length, "must not repeat an option"),
  /** Who may vote; default every member of the team. */
  electorate: z.array(AgentId).min(1).max(256).optional(),
  closesAt: z.iso.datetime({ offset: true }),
  rule: VoteRule,
});
export type VoteOpenBody = z.infer<typeof VoteOpenBody>;

export const VoteBallotBody = z.strictObject({ voteId: CollabId, option: z.string().min(1).max(200) });
export type VoteBallotBody = z.infer<typeof VoteBallotBody>;

export const VoteOutcome = z.enum(["decided", "undecided", "no-quorum"]);
export const VoteResult = z.strictObject({
  outcome: VoteOutcome,
  winner: z.string().nullable(),
  /** Why it came out this way, in one sentence. */
  reason: z.string(),
  tally: z.record(z.string(), z.int().nonnegative()),
  cast: z.int().nonnegative(),
  electorate: z.int().positive(),
  /** SHA-256 over the signed ballots counted (see `ballotsHash`). */
  ballotsHash: Hash,
});
export type VoteResult = z.infer<typeof VoteResult>;

export const VoteResultBody = z.strictObject({
  voteId: CollabId,
  teamId: TeamId,
  channel: ShortName,
  postId: CollabId,
  result: VoteResult,
});
export type VoteResultBody = z.infer<typeof VoteResultBody>;

export const KnowledgePublishBody = z.strictObject({
  entryId: CollabId,
  teamId: TeamId,
  title: z.string().min(1).max(300),
  content: z.string().min(1).max(64_000),
  tags: z.array(z.string().min(1).max(64)).max(32).default([]),
});
export type KnowledgePublishBody = z.infer<typeof KnowledgePublishBody>;

export const KnowledgeUseBody = z.strictObject({ entryId: CollabId, note: z.string().max(500).optional() });
export type KnowledgeUseBody = z.infer<typeof KnowledgeUseBody>;

export const DisputeSubject = z.strictObject({ kind: z.enum(["handoff", "vote"]), id: CollabId });
export const DisputeOpenBody = z.strictObject({
  disputeId: CollabId,
  subject: DisputeSubject,
  statement: z.string().min(1).max(8000),
  /** What the opener adds: message ids it relies on, a note, any data. */
  evidence: z
    .strictObject({
      messageIds: z.array(z.string().min(1).max(128)).max(100).default([]),
      note: z.string().max(8000).optional(),
      data: JsonObject.optional(),
    })
    .default({ messageIds: [] }),
});
export type DisputeOpenBody = z.infer<typeof DisputeOpenBody>;

export const StatusBody = PresenceUpdate;
export type StatusBody = z.infer<typeof StatusBody>;
