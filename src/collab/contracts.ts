/**
 * The collaboration API's records as the REST endpoints return them: the wire contract shared by
 * the SDK (src/client/collab*.ts) and the gateway's collaboration extension (src/extensions/collab).
 */
import type { Presence } from "../wire/api.js";
import type { StatusBody } from "./messages.js";

/**
 * Escrow credits (not money: there is no payment provider). One ledger document holds every
 * account's balance and every open escrow, so each movement is one compare-and-set: no movement
 * can be half done, and no balance can go below zero. A handoff's escrow is reserved from the
 * delegator when it is offered, held once accepted, then released to the delegate on completion or
 * refunded to the delegator on failure, decline or cancel. Every movement is stored and audited.
 */
export type MovementKind = "grant" | "reserve" | "hold" | "release" | "refund";

export type OpenEscrowState = "reserved" | "held";

export interface Escrow {
  from: string;
  to: string;
  amount: number;
  state: OpenEscrowState;
}

export interface Movement {
  /** Position in the ledger's history (1, 2, …), across every gateway sharing it. */
  seq: number;
  id: string;
  at: string;
  kind: MovementKind;
  amount: number;
  /** The agent whose balance changed (grant, reserve, release, refund) or the delegator (hold). */
  agent: string;
  escrowId?: string;
  /** For escrow movements: delegator and delegate. */
  from?: string;
  to?: string;
  /** Balances after the movement, of the agents it touched. */
  balances: Record<string, number>;
  note?: string;
}

export interface Balance {
  agentId: string;
  /** Spendable credits. */
  balance: number;
  /** Credits of this agent reserved or held for handoffs it delegated. */
  escrowed: number;
  /** Credits held for this agent on handoffs it accepted, released on completion. */
  incoming: number;
}

/** A published knowledge entry (bucket `collab-knowledge`, key `e.<entryId>`). */
export interface KnowledgeEntry {
  entryId: string;
  teamId: string;
  title: string;
  content: string;
  tags: string[];
  author: string;
  authorPrincipal: string;
  createdAt: string;
  messageId: string;
  /** The author's signed `agent.knowledge.publish`. */
  envelope: Record<string, unknown>;
  /** How many other agents used it (each earns the author a point once). */
  uses: number;
}

export interface SearchHit {
  entryId: string;
  title: string;
  tags: string[];
  author: string;
  uses: number;
  createdAt: string;
  /** The matching passage with the matches in [brackets]. */
  snippet: string;
  /** BM25 rank: lower is better. */
  score: number;
}

/** A team: its members post to its channels; only members may post, read or vote. */
export interface Team {
  teamId: string;
  name: string;
  owner: string;
  members: string[];
  createdAt: string;
  updatedAt: string;
}

export type PostKind = "message" | "vote.open" | "vote.result";

/** One message posted to a channel: delivered to every other member as its own signed direct message. */
export interface ChannelPost {
  postId: string;
  teamId: string;
  channel: string;
  kind: PostKind;
  from: string;
  at: string;
  body: Record<string, unknown>;
  /** Recipient → message id of the copy relayed to it. */
  delivered: Record<string, string>;
  /** Recipient → why the relay refused its copy (e.g. no handshake with it yet). */
  failed: Record<string, { code: number; message: string }>;
  /** One signed copy, as proof of what the sender said. */
  envelope: Record<string, unknown>;
}

export type TeamsRecord = Team | ChannelPost;

/** The latest signed status an agent published (bucket `collab-status`, key `s.<agent>`). */
export interface StatusRecord {
  agentId: string;
  messageId: string;
  at: string;
  update: StatusBody;
  envelope: Record<string, unknown>;
}

/** One event of `GET /api/v1/status/stream`. */
export type StatusEvent =
  | { type: "presence"; agentId: string; presence: Presence }
  | { type: "status"; agentId: string; status: StatusRecord };

/** A dispute about a handoff or a vote, escalated to the principals of the agents involved. */
export interface Dispute {
  disputeId: string;
  subject: { kind: "handoff" | "vote"; id: string };
  openedBy: string;
  /** The agents involved: the handoff's two parties, or the vote's electorate and creator. */
  parties: string[];
  /** Their principals: the humans the dispute is escalated to. */
  escalatedTo: string[];
  statement: string;
  evidence: {
    fromOpener: { messageIds: string[]; note?: string; data?: Record<string, unknown> };
    /** The subject's full record when the dispute was opened (signed offer, events, ballots…). */
    snapshot: Record<string, unknown>;
    snapshotHash: string;
  };
  status: "open" | "resolved";
  openedAt: string;
  messageId: string;
  envelope: Record<string, unknown>;
  delivered: ChannelPost["delivered"];
  failed: ChannelPost["failed"];
  resolution?: { by: string; at: string; text: string };
}
