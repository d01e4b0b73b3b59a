import type { EnvelopeHeaders } from "../protocol/index.js";
import { AcpError, decodeProtectedHeader } from "../protocol/index.js";
import {
  type AgreementDocument,
  type AgreementParty,
  checkPartySignature,
  type RoundEntry,
  roundHash,
  type SignedAgreement,
} from "./agreement.js";
import type { AcceptBody, OfferBody, RejectBody } from "./messages.js";
import { conflict, forbidden } from "./util.js";

/**
 * Negotiation sessions as pure state transitions (the routes store them through the broker). The ACP
 * messaging platform's rules: at most `maxRounds` offers (the proposal is round 1), a timeout per session,
 * only the party whose turn it is may counter or accept, nothing after a terminal state.
 */
export type NegotiationStatus = "open" | "accepted" | "rejected" | "exhausted" | "expired";
export const TERMINAL: ReadonlySet<NegotiationStatus> = new Set([
  "accepted",
  "rejected",
  "exhausted",
  "expired",
]);

export interface NegotiationRules {
  /** Offers per session, the proposal included. Default 10. */
  maxRounds: number;
  /** From the proposal until the session expires. Default 30 minutes. */
  timeoutMs: number;
}

export const DEFAULT_NEGOTIATION_RULES: NegotiationRules = { maxRounds: 10, timeoutMs: 30 * 60_000 };

export interface NegotiationRound extends RoundEntry {
  /** The history hash up to and including this round. */
  hash: string;
  /** The offerer's signature over the agreement this offer becomes if accepted. */
  agreementSignature: string;
  /** The signed offer message, as relayed. */
  envelope: Record<string, unknown>;
}

export interface NegotiationSession {
  sessionId: string;
  subject?: string;
  proposer: AgreementParty;
  responder: AgreementParty;
  status: NegotiationStatus;
  maxRounds: number;
  createdAt: string;
  expiresAt: string;
  updatedAt: string;
  rounds: NegotiationRound[];
  rejection?: { by: string; reason?: string; at: string; messageId: string };
  acceptance?: { by: string; at: string; messageId: string };
  agreement?: SignedAgreement;
}

/** A transition: the next state, and the error to answer with once it is stored (exhausted, expired). */
export interface Step {
  next: NegotiationSession;
  refusal?: AcpError;
}

const last = (s: NegotiationSession): NegotiationRound => s.rounds[s.rounds.length - 1] as NegotiationRound;

/** Whose turn it is: the party that did not make the latest offer (none once the session ended). */
export function turnOf(session: NegotiationSession): string | null {
  if (session.status !== "open") return null;
  return last(session).by === session.proposer.agentId ? session.responder.agentId : session.proposer.agentId;
}

/** The stored status, with `expired` applied once the timeout passed. */
export function statusAt(session: NegotiationSession, now: Date): NegotiationStatus {
  return session.status === "open" && now.getTime() >= Date.parse(session.expiresAt)
    ? "expired"
    : session.status;
}

export function isParty(session: NegotiationSession, agentId: string): boolean {
  return session.proposer.agentId === agentId || session.responder.agentId === agentId;
}

/** The agreement document an offer becomes if accepted. */
export function agreementDocument(
  session: Pick<NegotiationSession, "sessionId" | "subject" | "proposer" | "responder">,
  round: Pick<NegotiationRound, "round" | "terms" | "by" | "at" | "hash">,
): AgreementDocument {
  return {
    type: "acp.agreement",
    version: 1,
    sessionId: session.sessionId,
    ...(session.subject !== undefined ? { subject: session.subject } : {}),
    parties: [session.proposer, session.responder],
    terms: round.terms,
    round: round.round,
    historyHash: round.hash,
    offeredBy: round.by,
    offeredAt: round.at,
  };
}

function bodyProblem(path: string, message: string): AcpError {
  return new AcpError("InvalidParams", `${path}: ${message}`, {
    problems: [{ path: `/params/body/${path}`, message }],
  });
}

/** Builds the round an offer adds, checking its history hash and the offerer's agreement signature. */
function offerRound(
  session: Pick<NegotiationSession, "sessionId" | "subject" | "proposer" | "responder" | "rounds">,
  offerer: AgreementParty,
  body: OfferBody,
  headers: EnvelopeHeaders,
  envelope: Record<string, unknown>,
): NegotiationRound {
  const expectedRound = session.rounds.length + 1;
  if (body.round !== expectedRound) {
    throw conflict(`this offer is for round ${body.round}, but the next round is ${expectedRound}`, {
      problems: [{ path: "/params/body/round", message: `must be ${expectedRound}` }],
    });
  }
  const entry: RoundEntry = {
    round: body.round,
    by: offerer.agentId,
    terms: body.terms,
    messageId: headers["message-id"],
    at: headers.timestamp,
  };
  const prev = session.rounds.length > 0 ? last(session as NegotiationSession).hash : null;
  const hash = roundHash(prev, entry);
  if (body.historyHash !== hash)
    throw bodyProblem("historyHash", `does not match the history (expected ${hash})`);
  const round = { ...entry, hash, agreementSignature: body.agreementSignature, envelope };
  const failure = checkPartySignature(agreementDocument(session, round), offerer, body.agreementSignature);
  if (failure) {
    throw new AcpError("SignatureInvalid", `agreementSignature ${failure}`, {
      problems: [{ path: "/params/body/agreementSignature", message: failure }],
    });
  }
  return round;
}

export function startSession(
  proposer: AgreementParty,
  responder: AgreementParty,
  body: OfferBody,
  headers: EnvelopeHeaders,
  envelope: Record<string, unknown>,
  rules: NegotiationRules,
  now: Date,
): NegotiationSession {
  if (body.round !== 1) throw bodyProblem("round", "a proposal is round 1");
  const base = {
    sessionId: body.sessionId,
    ...(body.subject !== undefined ? { subject: body.subject } : {}),
    proposer,
    responder,
    rounds: [] as NegotiationRound[],
  };
  const round = offerRound(base, proposer, body, headers, envelope);
  return {
    ...base,
    status: "open",
    maxRounds: rules.maxRounds,
    createdAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + rules.timeoutMs).toISOString(),
    updatedAt: now.toISOString(),
    rounds: [round],
  };
}

/** Refusals every action shares: parties only, nothing after a terminal state, expiry stored. */
function precheck(session: NegotiationSession, by: string, now: Date): Step | undefined {
  if (!isParty(session, by)) throw forbidden(`${by} is not a party to negotiation ${session.sessionId}`);
  if (TERMINAL.has(session.status)) {
    throw conflict(`negotiation ${session.sessionId} is ${session.status}; nothing can follow`, {
      status: session.status,
    });
  }
  if (statusAt(session, now) === "expired") {
    return {
      next: { ...session, status: "expired", updatedAt: now.toISOString() },
      refusal: conflict(`negotiation ${session.sessionId} expired at ${session.expiresAt}`, {
        status: "expired",
      }),
    };
  }
  return undefined;
}

function requireTurn(session: NegotiationSession, by: string, action: string): void {
  const turn = turnOf(session);
  if (turn !== by) {
    throw conflict(`it is ${turn}'s turn in negotiation ${session.sessionId}; ${by} cannot ${action} now`, {
      turn,
    });
  }
}

export function counter(
  session: NegotiationSession,
  by: string,
  body: OfferBody,
  headers: EnvelopeHeaders,
  envelope: Record<string, unknown>,
  now: Date,
): Step {
  const early = precheck(session, by, now);
  if (early) return early;
  requireTurn(session, by, "counter");
  if (body.subject !== undefined) throw bodyProblem("subject", "only the proposal names the subject");
  if (session.rounds.length >= session.maxRounds) {
    return {
      next: { ...session, status: "exhausted", updatedAt: now.toISOString() },
      refusal: conflict(
        `offer ${session.rounds.length + 1} refused: a negotiation allows at most ${session.maxRounds} rounds; session ${session.sessionId} is now exhausted`,
        { status: "exhausted", maxRounds: session.maxRounds },
      ),
    };
  }
  const offerer = session.proposer.agentId === by ? session.proposer : session.responder;
  const round = offerRound(session, offerer, body, headers, envelope);
  return { next: { ...session, rounds: [...session.rounds, round], updatedAt: now.toISOString() } };
}

export function accept(
  session: NegotiationSession,
  by: string,
  body: AcceptBody,
  headers: EnvelopeHeaders,
  now: Date,
): Step {
  const early = precheck(session, by, now);
  if (early) return early;
  requireTurn(session, by, "accept");
  const offer = last(session);
  if (body.round !== offer.round) {
    throw conflict(`the latest offer is round ${offer.round}, not ${body.round}`, {
      problems: [{ path: "/params/body/round", message: `must be ${offer.round}` }],
    });
  }
  if (body.historyHash !== offer.hash) throw bodyProblem("historyHash", `must be ${offer.hash}`);
  const acceptor = session.proposer.agentId === by ? session.proposer : session.responder;
  const offerer = acceptor === session.proposer ? session.responder : session.proposer;
  const document = agreementDocument(session, offer);
  const failure = checkPartySignature(document, acceptor, body.agreementSignature);
  if (failure) {
    throw new AcpError("SignatureInvalid", `agreementSignature ${failure}`, {
      problems: [{ path: "/params/body/agreementSignature", message: failure }],
    });
  }
  const signed = new Map([
    [offerer.agentId, offer.agreementSignature],
    [acceptor.agentId, body.agreementSignature],
  ]);
  const signatures = [session.proposer, session.responder].map((party) => {
    const signature = signed.get(party.agentId) as string;
    return { kid: decodeProtectedHeader(signature.slice(0, signature.indexOf(".."))).kid, signature };
  });
  return {
    next: {
      ...session,
      status: "accepted",
      updatedAt: now.toISOString(),
      acceptance: { by, at: headers.timestamp, messageId: headers["message-id"] },
      agreement: { document, signatures },
    },
  };
}

export function reject(
  session: NegotiationSession,
  by: string,
  body: RejectBody,
  headers: EnvelopeHeaders,
  now: Date,
): Step {
  const early = precheck(session, by, now);
  if (early) return early;
  return {
    next: {
      ...session,
      status: "rejected",
      updatedAt: now.toISOString(),
      rejection: {
        by,
        ...(body.reason !== undefined ? { reason: body.reason } : {}),
        at: headers.timestamp,
        messageId: headers["message-id"],
      },
    },
  };
}

/** What GET returns: the session with its effective status and whose turn it is, without the envelopes. */
export type NegotiationView = Omit<NegotiationSession, "rounds"> & {
  /** Who may counter or accept now (null once the session ended). */
  turn: string | null;
  /** Offers made so far. */
  round: number;
  latest: Omit<NegotiationRound, "envelope"> | null;
};

export function sessionView(session: NegotiationSession, now: Date): NegotiationView {
  const status = statusAt(session, now);
  const { rounds, ...rest } = session;
  return {
    ...rest,
    status,
    turn: status === "open" ? turnOf(session) : null,
    round: rounds.length,
    latest: rounds.length > 0 ? offerView(last(session)) : null,
  };
}

export function offerView(round: NegotiationRound): Omit<NegotiationRound, "envelope"> {
  const { envelope: _signed, ...rest } = round;
  return rest;
}
