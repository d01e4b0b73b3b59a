import { randomUUID } from "node:crypto";
import { partyOf, roundHash, type SignedAgreement, signAgreement } from "../collab/agreement.js";
import { CollabMethod } from "../collab/messages.js";
import {
  agreementDocument,
  type NegotiationRound,
  type NegotiationView,
  TERMINAL,
} from "../collab/negotiation.js";
import { ownId } from "../collab/util.js";
import { AcpError } from "../protocol/index.js";
import { type CollabCore, path } from "./collab-core.js";

/** What a strategy decides on its turn. */
export type NegotiationDecision =
  | { accept: true }
  | { counter: Record<string, unknown> }
  | { reject: true | string };

/** What a strategy sees on its turn: the session and the offer on the table. */
export interface NegotiationTurn {
  session: NegotiationView;
  /** The terms of the latest offer (the other party's). */
  offer: Record<string, unknown>;
  /** The round of that offer (1 = the proposal). */
  round: number;
  /** Rounds left for a counter-offer; 0 means the only choices are accept or reject. */
  roundsLeft: number;
  from: string;
}

export type NegotiationStrategy = (
  turn: NegotiationTurn,
) => NegotiationDecision | Promise<NegotiationDecision>;

export interface NegotiationHistory {
  sessionId: string;
  status: NegotiationView["status"];
  rounds: NegotiationRound[];
}

interface Loop {
  strategy: NegotiationStrategy;
  chain: Promise<void>;
  resolve(view: NegotiationView): void;
  reject(err: unknown): void;
  timer?: NodeJS.Timeout;
}

const BASE = "/negotiations";

/**
 * Negotiation through the gateway: every offer is signed twice, as a message and as the agreement
 * it becomes if accepted, so acceptance yields an agreement both parties signed. `negotiate` and
 * `onProposal` run a strategy function on each of this agent's turns until the session ends.
 */
export class NegotiationClient {
  private readonly loops = new Map<string, Loop>();
  private responder: NegotiationStrategy | undefined;

  constructor(
    private readonly core: CollabCore,
    /** Where failures of `onProposal` sessions go (nobody awaits those). */
    private readonly onError: (err: Error) => void = () => undefined,
  ) {}

  /** Opens a session with `peer` by proposing `terms` (round 1). */
  async propose(
    peer: string,
    terms: Record<string, unknown>,
    options: { subject?: string; sessionId?: string } = {},
  ): Promise<NegotiationView> {
    const sessionId = ownId(this.core.agentId, options.sessionId ?? randomUUID());
    await this.core.reach(peer);
    const [mine, theirs, names] = await Promise.all([
      this.core.view(this.core.agentId),
      this.core.view(peer),
      this.core.namesFor(peer),
    ]);
    const parties = {
      sessionId,
      proposer: partyOf({ ...names, signing: mine.signing }),
      responder: partyOf({
        agentId: theirs.agent_id,
        principalId: theirs.principal_id,
        signing: theirs.signing,
      }),
      ...subjectOf(options.subject),
    };
    const signed = await this.offer(peer, CollabMethod.propose, parties, null, 1, terms, options.subject);
    return this.core.call("POST", BASE, signed);
  }

  /** A counter-offer: the next round, by the party whose turn it is. */
  async counter(sessionId: string, terms: Record<string, unknown>): Promise<NegotiationView> {
    const session = await this.get(sessionId);
    const peer = await this.other(session);
    await this.core.reach(peer);
    const signed = await this.offer(
      peer,
      CollabMethod.counter,
      session,
      session.latest?.hash ?? null,
      session.round + 1,
      terms,
    );
    return this.core.call("POST", `${BASE}/${path(sessionId)}/counter`, signed);
  }

  /** Accepts the latest offer; the answer carries the agreement signed by both parties. */
  async accept(sessionId: string): Promise<NegotiationView & { agreement: SignedAgreement }> {
    const session = await this.get(sessionId);
    const latest = session.latest;
    if (!latest) throw new AcpError("Conflict", `negotiation ${sessionId} has no offer to accept`);
    const peer = await this.other(session);
    await this.core.reach(peer);
    const agreementSignature = signAgreement(agreementDocument(session, latest), this.core.signer);
    const { message } = await this.core.sign(CollabMethod.accept, peer, {
      sessionId,
      round: latest.round,
      historyHash: latest.hash,
      agreementSignature,
    });
    return this.core.call("POST", `${BASE}/${path(sessionId)}/accept`, message);
  }

  /** Ends the session, with an optional reason. Either party may reject while it is open. */
  async reject(sessionId: string, reason?: string): Promise<NegotiationView> {
    const session = await this.get(sessionId);
    const peer = await this.other(session);
    await this.core.reach(peer);
    const { message } = await this.core.sign(CollabMethod.reject, peer, {
      sessionId,
      ...(reason ? { reason } : {}),
    });
    return this.core.call("POST", `${BASE}/${path(sessionId)}/reject`, message);
  }

  get(sessionId: string): Promise<NegotiationView> {
    return this.core.call("GET", `${BASE}/${path(sessionId)}`);
  }

  history(sessionId: string): Promise<NegotiationHistory> {
    return this.core.call("GET", `${BASE}/${path(sessionId)}/history`);
  }

  agreement(sessionId: string): Promise<SignedAgreement> {
    return this.core.call("GET", `${BASE}/${path(sessionId)}/agreement`);
  }

  async list(status?: NegotiationView["status"]): Promise<NegotiationView[]> {
    const query = status ? `?status=${encodeURIComponent(status)}` : "";
    return (await this.core.call<{ negotiations: NegotiationView[] }>("GET", `${BASE}${query}`)).negotiations;
  }

  /**
   * Proposes `terms` to `peer`, then lets `strategy` decide each of this agent's turns; resolves
   * with the final session (accepted with its agreement, rejected, exhausted or expired).
   */
  negotiate(
    peer: string,
    terms: Record<string, unknown>,
    strategy: NegotiationStrategy,
    options: { subject?: string } = {},
  ): Promise<NegotiationView> {
    const sessionId = ownId(this.core.agentId, randomUUID());
    const done = this.track(sessionId, strategy);
    this.propose(peer, terms, { ...options, sessionId })
      .then((view) => this.armExpiry(view))
      .catch((err: unknown) => this.fail(sessionId, err));
    return done;
  }

  /** Runs `strategy` for every proposal other agents send this agent. */
  onProposal(strategy: NegotiationStrategy): void {
    this.responder = strategy;
  }

  /** Called with every verified negotiation notification this agent receives. */
  dispatch(method: string, body: Record<string, unknown>): void {
    const sessionId = typeof body.sessionId === "string" ? body.sessionId : undefined;
    if (!sessionId) return;
    let loop = this.loops.get(sessionId);
    if (!loop && method === CollabMethod.propose && this.responder) {
      void this.track(sessionId, this.responder).catch((err: Error) => this.onError(err));
      loop = this.loops.get(sessionId);
    }
    if (!loop) return;
    const current = loop;
    current.chain = current.chain
      .then(() => this.step(sessionId, current))
      .catch((err: unknown) => this.fail(sessionId, err));
  }

  private track(sessionId: string, strategy: NegotiationStrategy): Promise<NegotiationView> {
    return new Promise<NegotiationView>((resolve, reject) => {
      this.loops.set(sessionId, { strategy, chain: Promise.resolve(), resolve, reject });
    });
  }

  /** One look at the session: finish if it ended, decide if it is this agent's turn. */
  private async step(sessionId: string, loop: Loop): Promise<void> {
    let session = await this.get(sessionId);
    this.armExpiry(session);
    if (session.turn !== null && session.turn === (await this.selfIn(session)) && session.latest) {
      const decision = await loop.strategy({
        session,
        offer: session.latest.terms,
        round: session.latest.round,
        roundsLeft: session.maxRounds - session.round,
        from: session.latest.by,
      });
      session = await this.decide(session, decision);
    }
    if (TERMINAL.has(session.status)) this.finish(sessionId, session);
  }

  private async decide(session: NegotiationView, decision: NegotiationDecision): Promise<NegotiationView> {
    if ("accept" in decision) return this.accept(session.sessionId);
    if ("reject" in decision)
      return this.reject(session.sessionId, decision.reject === true ? undefined : decision.reject);
    try {
      return await this.counter(session.sessionId, decision.counter);
    } catch (err) {
      // The round limit ends the session: report how it ended rather than the refusal.
      if (err instanceof AcpError && err.data.status === "exhausted") return this.get(session.sessionId);
      throw err;
    }
  }

  private armExpiry(session: NegotiationView): void {
    const loop = this.loops.get(session.sessionId);
    if (!loop || loop.timer) return;
    const delay = Math.max(0, Date.parse(session.expiresAt) - Date.now()) + 1000;
    loop.timer = setTimeout(
      () => this.dispatch(CollabMethod.counter, { sessionId: session.sessionId }),
      delay,
    );
    loop.timer.unref();
  }

  private finish(sessionId: string, session: NegotiationView): void {
    const loop = this.loops.get(sessionId);
    if (!loop) return;
    clearTimeout(loop.timer);
    this.loops.delete(sessionId);
    loop.resolve(session);
  }

  private fail(sessionId: string, err: unknown): void {
    const loop = this.loops.get(sessionId);
    if (!loop) return;
    clearTimeout(loop.timer);
    this.loops.delete(sessionId);
    loop.reject(err);
  }

  /** What the session calls this agent: its id, or its address in a negotiation across domains. */
  private async selfIn(session: Pick<NegotiationView, "proposer" | "responder">): Promise<string> {
    const { address } = await this.core.view(this.core.agentId);
    const named = (id: string) => session.proposer.agentId === id || session.responder.agentId === id;
    return address !== undefined && named(address) ? address : this.core.agentId;
  }

  private async other(session: Pick<NegotiationView, "proposer" | "responder">): Promise<string> {
    const self = await this.selfIn(session);
    return session.proposer.agentId === self ? session.responder.agentId : session.proposer.agentId;
  }

  /** An offer message whose body carries the history hash and this agent's agreement signature. */
  private async offer(
    peer: string,
    method: string,
    session: Pick<NegotiationView, "sessionId" | "subject" | "proposer" | "responder">,
    prev: string | null,
    round: number,
    terms: Record<string, unknown>,
    subject?: string,
  ): Promise<Record<string, unknown>> {
    const by = (await this.core.namesFor(peer)).agentId;
    const { message } = await this.core.sign(method, peer, ({ messageId, timestamp }) => {
      const entry = { round, by, terms, messageId, at: timestamp };
      const hash = roundHash(prev, entry);
      const document = agreementDocument(session, { ...entry, hash });
      return {
        sessionId: session.sessionId,
        ...subjectOf(subject),
        round,
        terms,
        historyHash: hash,
        agreementSignature: signAgreement(document, this.core.signer),
      };
    });
    return message;
  }
}

function subjectOf(subject: string | undefined): { subject?: string } {
  return subject === undefined ? {} : { subject };
}
