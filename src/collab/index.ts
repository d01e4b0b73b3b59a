/**
 * `acp-kit/collab`: the collaboration protocol shared by agents and the gateway: message bodies,
 * signed agreements, the handoff lifecycle, vote tallies and the REST API's records. The SDK's
 * `CollabClient` is in `acp-kit/client`; the gateway side (`collabExtension`) in `acp-kit/server`.
 * See docs/collab.md.
 */

export {
  type AgreementCheck,
  AgreementDocument,
  AgreementParty,
  partyOf,
  type RoundEntry,
  roundHash,
  SignedAgreement,
  signAgreement,
  verifyAgreement,
} from "./agreement.js";
export {
  HANDOFF_RULES,
  type HandoffAction,
  type HandoffEvent,
  type HandoffRecord,
  type HandoffStatus,
  type HandoffView,
} from "./handoff.js";
export type {
  Balance,
  ChannelPost,
  Dispute,
  Escrow,
  KnowledgeEntry,
  Movement,
  MovementKind,
  PostKind,
  SearchHit,
  StatusEvent,
  StatusRecord,
  Team,
} from "./contracts.js";
export {
  AcceptBody,
  CollabMethod,
  DisputeOpenBody,
  DisputeSubject,
  GATEWAY_COLLAB_PRINCIPAL,
  HandoffActionBody,
  HandoffExpiredBody,
  HandoffOfferBody,
  HandoffProgressBody,
  HandoffTask,
  KnowledgePublishBody,
  KnowledgeUseBody,
  OfferBody,
  RejectBody,
  StatusBody,
  TeamCreateBody,
  TeamMembersBody,
  TeamMessageBody,
  VoteBallotBody,
  VoteOpenBody,
  VoteOutcome,
  VoteResult,
  VoteResultBody,
  VoteRule,
  VoteRuleType,
} from "./messages.js";
export {
  agreementDocument,
  DEFAULT_NEGOTIATION_RULES,
  type NegotiationRound,
  type NegotiationRules,
  type NegotiationSession,
  type NegotiationStatus,
  type NegotiationView,
  turnOf,
} from "./negotiation.js";
export { CollabId, ownId, TeamId } from "./util.js";
export { type Ballot, ballotsHash, recount, tallyVote, type Vote } from "./votes.js";
