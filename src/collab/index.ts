/**
 * `acp-kit/collab`: negotiation with signed agreements, task handoff with escrow, status
 * broadcasting, and team collaboration (channels, votes, knowledge, disputes). See docs/collab.md.
 */

export {
  CollabClient,
  type CollabClientOptions,
  type CollabEvents,
  type CollabNotice,
  type HandoffDecision,
  type HandoffOffer,
  type NegotiationDecision,
  type NegotiationStrategy,
  type NegotiationTurn,
  type StatusSubscription,
} from "../client/collab.js";
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
export type { CollabAuditEvent } from "../extensions/collab/audit.js";
export {
  HANDOFF_RULES,
  type HandoffAction,
  type HandoffEvent,
  type HandoffRecord,
  type HandoffStatus,
  type HandoffView,
  pendingHandoffs,
  watchPendingHandoffs,
} from "../extensions/collab/handoff.js";
export type { KnowledgeEntry, SearchHit } from "../extensions/collab/knowledge-index.js";
export type { Balance, Escrow, Movement, MovementKind } from "../extensions/collab/ledger.js";
export * from "./messages.js";
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
export { type CollabOptions, collabExtension } from "../extensions/collab/extension.js";
export type { Dispute } from "../extensions/collab/routes-dispute.js";
export type { StatusEvent, StatusRecord } from "../extensions/collab/routes-status.js";
export { COLLAB_BUCKETS } from "../extensions/collab/store.js";
export type { ChannelPost, PostKind, Team } from "../extensions/collab/teams.js";
export { CollabId } from "./util.js";
export { type Ballot, ballotsHash, recount, tallyVote, type Vote } from "./votes.js";
