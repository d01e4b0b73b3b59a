import { expect, it } from "vitest";
import { NegotiationClient, type NegotiationTurn } from "../../src/client/collab.js";
import { CollabCore } from "../../src/client/collab-core.js";
import { verifyAgreement } from "../../src/collab/index.js";
import { AcpError, ErrorCode } from "../../src/protocol/index.js";
import {
  auditMethods,
  auditSummaries,
  type GatewayFactory,
  until,
  useCollabBed,
} from "../helpers/collab-testbed.js";

export async function rejection(promise: Promise<unknown>): Promise<AcpError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AcpError) return err;
    throw err;
  }
  throw new Error("expected the call to be refused");
}

/** Negotiation through a real gateway: agreements, the round limit, expiry, turns. */
export function negotiationSuite(makeGateway: GatewayFactory): void {
  const bed = useCollabBed(makeGateway, { negotiation: { maxRounds: 10, timeoutMs: 30 * 60_000 } });

  it("negotiates with two strategies to an agreement both parties signed, verifiable with the public keys alone", async () => {
    const buyer = await bed.member("buyer");
    const seller = await bed.member("seller");
    const seen: NegotiationTurn[] = [];
    // The seller meets the buyer half way until the gap is small.
    seller.collab.negotiations.onProposal((turn) => {
      seen.push(turn);
      const price = turn.offer.price as number;
      return price >= 90 ? { accept: true } : { counter: { ...turn.offer, price: 100 } };
    });
    const final = await buyer.collab.negotiations.negotiate(
      "seller",
      { price: 60, deadline: "2026-03-01", scope: "translation" },
      (turn) => ({
        counter: { ...turn.offer, price: Math.round(((turn.offer.price as number) + 60) / 2) + 15 },
      }),
      { subject: "translation job" },
    );
    expect(final.status).toBe("accepted");
    expect(seen.map((t) => t.offer.price)).toEqual([60, 95]);
    const agreement = await buyer.collab.negotiations.agreement(final.sessionId);
    expect(agreement.document).toMatchObject({
      type: "acp.agreement",
      sessionId: final.sessionId,
      subject: "translation job",
      terms: { price: 95, deadline: "2026-03-01", scope: "translation" },
      round: 3,
      offeredBy: "buyer",
    });
    expect(agreement.document.parties.map((p) => p.agentId)).toEqual(["buyer", "seller"]);
    const history = await seller.collab.negotiations.history(final.sessionId);
    expect(history.rounds.map((r) => [r.round, r.by, r.terms.price])).toEqual([
      [1, "buyer", 60],
      [2, "seller", 100],
      [3, "buyer", 95],
    ]);
    expect(agreement.document.historyHash).toBe(history.rounds[2]?.hash);
    const keys = [buyer.test.identity, seller.test.identity].map((i) => ({
      agentId: i.agentId,
      principalId: i.principalId,
      signing: { kty: "OKP" as const, crv: "Ed25519" as const, x: i.signing.x },
    }));
    expect(verifyAgreement(agreement, keys)).toMatchObject({ valid: true, signedBy: ["buyer", "seller"] });
    const tampered = structuredClone(agreement);
    tampered.document.terms.price = 9;
    const check = verifyAgreement(tampered, keys);
    expect(check.valid).toBe(false);
    expect(check.problems.map((p) => p.path)).toEqual(["/signatures/0", "/signatures/1"]);
    // Both sides' sessions agree, and the acceptance is in the collaboration audit log.
    await until(
      () => seller.collab.negotiations.get(final.sessionId),
      (s) => s.status === "accepted",
      "the seller sees it accepted",
    );
    expect(await auditMethods(bed, "agent.negotiation.accept")).toEqual(
      expect.arrayContaining([
        "agent.negotiation.propose",
        "agent.negotiation.counter",
        "agent.negotiation.accept",
      ]),
    );
    // Each step reads as a sentence: the terms and the round of the session's limit, no ids.
    expect(await auditSummaries(bed, "agent.negotiation.counter")).toEqual([
      "seller countered with price 100, deadline 2026-03-01, scope translation (round 2 of 10)",
      "buyer countered with price 95, deadline 2026-03-01, scope translation (round 3 of 10)",
    ]);
    expect(await auditSummaries(bed, "agent.negotiation.accept")).toEqual([
      "seller accepted buyer's offer (round 3 of 10); both have signed the agreement",
    ]);
  });

  it("refuses an out-of-turn counter and an acceptance by the party that made the offer", async () => {
    const a = await bed.member("party-a");
    await bed.member("party-b");
    const session = await a.collab.negotiations.propose("party-b", { price: 10 });
    expect(session).toMatchObject({ status: "open", turn: "party-b", round: 1 });
    const outOfTurn = await rejection(a.collab.negotiations.counter(session.sessionId, { price: 11 }));
    expect(outOfTurn.code).toBe(ErrorCode.Conflict);
    expect(outOfTurn.message).toMatch(/it is party-b's turn/);
    expect(outOfTurn.data.turn).toBe("party-b");
    const ownOffer = await rejection(a.collab.negotiations.accept(session.sessionId));
    expect(ownOffer.message).toMatch(/party-a cannot accept now/);
    expect((await a.collab.negotiations.get(session.sessionId)).round).toBe(1);
  });

  it("allows ten rounds; the eleventh offer is refused and the session ends exhausted", async () => {
    const a = await bed.member("haggler-a");
    const b = await bed.member("haggler-b");
    const { sessionId } = await a.collab.negotiations.propose("haggler-b", { price: 1 });
    for (let round = 2; round <= 10; round++) {
      const by = round % 2 === 0 ? b : a;
      const view = await by.collab.negotiations.counter(sessionId, { price: round });
      expect(view.round).toBe(round);
    }
    const eleventh = await rejection(a.collab.negotiations.counter(sessionId, { price: 11 }));
    expect(eleventh.code).toBe(ErrorCode.Conflict);
    expect(eleventh.message).toMatch(/offer 11 refused: a negotiation allows at most 10 rounds/);
    expect(eleventh.data.status).toBe("exhausted");
    const after = await a.collab.negotiations.get(sessionId);
    expect(after).toMatchObject({ status: "exhausted", round: 10, turn: null });
    const nothingMore = await rejection(a.collab.negotiations.accept(sessionId));
    expect(nothingMore.message).toMatch(/is exhausted; nothing can follow/);
  });

  it("expires after the timeout (by the gateway's clock) and refuses anything afterwards", async () => {
    const a = await bed.member("slow-a");
    const b = await bed.member("slow-b");
    const { sessionId, expiresAt, createdAt } = await a.collab.negotiations.propose("slow-b", { price: 5 });
    expect(Date.parse(expiresAt) - Date.parse(createdAt)).toBe(30 * 60_000);
    bed.advance(29 * 60_000);
    expect((await b.collab.negotiations.get(sessionId)).status).toBe("open");
    bed.advance(60_000);
    expect((await b.collab.negotiations.get(sessionId)).status).toBe("expired");
    const late = await rejection(b.collab.negotiations.accept(sessionId));
    expect(late.code).toBe(ErrorCode.Conflict);
    expect(late.message).toMatch(/expired at/);
    const again = await rejection(b.collab.negotiations.counter(sessionId, { price: 6 }));
    expect(again.message).toMatch(/is expired; nothing can follow/);
    expect((await a.collab.negotiations.list("expired")).map((s) => s.sessionId)).toEqual([sessionId]);
  });

  it("a rejection with a reason ends the session for both, and strangers cannot see it", async () => {
    const a = await bed.member("rej-a");
    const b = await bed.member("rej-b");
    const stranger = await bed.offline("stranger");
    const { sessionId } = await a.collab.negotiations.propose("rej-b", { price: 5 });
    const notices: string[] = [];
    a.collab.on("negotiation", (n) => notices.push(`${n.method}:${String(n.body.reason)}`));
    const rejected = await b.collab.negotiations.reject(sessionId, "too cheap to bother");
    expect(rejected).toMatchObject({
      status: "rejected",
      rejection: { by: "rej-b", reason: "too cheap to bother" },
    });
    await until(
      () => notices,
      (n) => n.length === 1,
      "the proposer hears the rejection",
    );
    expect(notices).toEqual(["agent.negotiation.reject:too cheap to bother"]);
    expect((await rejection(a.collab.negotiations.counter(sessionId, { price: 6 }))).message).toMatch(
      /is rejected/,
    );
    expect((await rejection(stranger.collab.negotiations.get(sessionId))).code).toBe(ErrorCode.NotFound);
    expect((await rejection(a.collab.negotiations.agreement(sessionId))).message).toMatch(/has no agreement/);
  });

  it("undoes a proposal the relay refuses (no handshake yet), so no session is left behind", async () => {
    const a = await bed.offline("loner-a");
    await bed.offline("loner-b");
    const core = new CollabCore({ gateway: bed.gw.url, identity: a.test.identity, apiKey: a.test.apiKey });
    // Skip the client's own handshake step: the gateway's relay must refuse the message itself.
    core.reach = async () => undefined;
    const refused = await rejection(
      new NegotiationClient(core).propose("loner-b", { price: 1 }, { sessionId: "session-undo-1" }),
    );
    expect(refused.code).toBe(ErrorCode.HandshakeRequired);
    expect((await rejection(a.collab.negotiations.get("loner-a.session-undo-1"))).code).toBe(
      ErrorCode.NotFound,
    );
    expect(await a.collab.negotiations.list()).toEqual([]);
  });
}
