import { join } from "node:path";
import { beforeAll, expect, it } from "vitest";
import { readAudit, verifyAudit } from "../../src/audit/index.js";
import { CollabClient } from "../../src/client/index.js";
import {
  agreementDocument,
  type NegotiationView,
  roundHash,
  type SignedAgreement,
  signAgreement,
  verifyAgreement,
} from "../../src/collab/index.js";
import { buildNotification, createSigner, generateIdentity, signMessage } from "../../src/protocol/index.js";
import {
  type FederatedGateway,
  type Organization,
  transferFrom,
  useFederatedPair,
} from "../helpers/federation.js";
import { api, type TestAgent } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

/**
 * A negotiation between an agent of a.test and one of b.test: each gateway keeps a copy of the
 * session, applies its own agent's moves and verifies the other's as they arrive over the link, and
 * both end with the same agreement, signed by both parties' keys from their home directories.
 * Written once for both brokers: each gateway on the embedded store, or each on a NATS of its own.
 */
export function negotiationAcrossTheLink(broker: "embedded" | "nats"): void {
  let orgA: Organization;
  let orgB: Organization;
  let a: FederatedGateway;
  let b: FederatedGateway;
  let alphaReg: TestAgent;
  let betaReg: TestAgent;
  let alpha: CollabClient;
  let beta: CollabClient;
  const started = useFederatedPair(broker);

  beforeAll(async () => {
    ({ orgA, orgB, a, b } = started());
    const alphaAgent = await a.agent("alpha");
    const betaAgent = await b.agent("beta");
    alphaReg = alphaAgent.registered;
    betaReg = betaAgent.registered;
    alpha = new CollabClient({
      agent: alphaAgent.agent,
      identity: alphaReg.identity,
      apiKey: alphaReg.apiKey,
      layers: [0, 1, 2],
    });
    beta = new CollabClient({
      agent: betaAgent.agent,
      identity: betaReg.identity,
      apiKey: betaReg.apiKey,
      layers: [0, 1, 2],
    });
  });

  const atB = (id: string, done: (v: NegotiationView) => boolean, what: string) =>
    until(
      () => beta.negotiations.get(id).catch(() => undefined),
      (v) => v !== undefined && done(v),
      what,
    );
  const atA = (id: string, done: (v: NegotiationView) => boolean, what: string) =>
    until(() => alpha.negotiations.get(id), done, what);

  it("propose, counter, accept: both gateways hold the same agreement, signed by both home keys", async () => {
    const proposed = await alpha.negotiations.propose("beta@b.test", { price: 100 }, { subject: "widgets" });
    expect(proposed.proposer.agentId).toBe("alpha@a.test");
    expect(proposed.responder).toMatchObject({
      agentId: "beta@b.test",
      principalId: "principal-beta@b.test",
    });
    const id = proposed.sessionId;
    await atB(id, (v) => v.round === 1 && v.turn === "beta@b.test", "b.test holds the proposal");

    const countered = await beta.negotiations.counter(id, { price: 120 });
    expect(countered.round).toBe(2);
    await atA(id, (v) => v.round === 2 && v.turn === "alpha@a.test", "a.test applied beta's counter");

    const accepted = await alpha.negotiations.accept(id);
    expect(accepted.status).toBe("accepted");
    await atB(id, (v) => v.status === "accepted", "b.test applied alpha's acceptance");

    const fromA = await alpha.negotiations.agreement(id);
    const fromB = await beta.negotiations.agreement(id);
    expect(fromB).toEqual(fromA);
    expect(fromA.document).toMatchObject({ terms: { price: 120 }, offeredBy: "beta@b.test", round: 2 });
    // Each party's key as the other organization's gateway knows it, from that party's home directory.
    const betaAtA = await api(a.url, "/api/v1/agents/beta%40b.test", { apiKey: alphaReg.apiKey });
    const alphaAtB = await api(b.url, "/api/v1/agents/alpha%40a.test", { apiKey: betaReg.apiKey });
    const trusted = [betaAtA.json, alphaAtB.json].map((v) => ({
      agentId: v.agentId as string,
      principalId: v.principalId as string,
      signing: v.signing as { kty: "OKP"; crv: "Ed25519"; x: string; kid: string },
    }));
    const check = verifyAgreement(fromA, trusted as Parameters<typeof verifyAgreement>[1]);
    expect(check.problems).toEqual([]);
    expect(check.signedBy.sort()).toEqual(["alpha@a.test", "beta@b.test"]);

    // A party's own history at its gateway shows the other party's move as it verified it.
    const historyA = await alpha.negotiations.history(id);
    const historyB = await beta.negotiations.history(id);
    expect(historyB.rounds.map((r) => r.hash)).toEqual(historyA.rounds.map((r) => r.hash));

    // Both gateways' collaboration audits hold every move, the other party's too, and verify.
    for (const gw of [a, b]) {
      const root = join(gw.dataDir, "collab-audit");
      await until(
        async () => {
          const moves: string[] = [];
          for await (const { entry } of readAudit({ root, agent: "collab" })) {
            if (entry.id === id) moves.push(`${entry.method} by ${entry.from.agent}`);
          }
          return moves;
        },
        (moves) => moves.length === 3,
        `${gw.org.domain}'s collaboration audit holds the three moves`,
      ).then((moves) =>
        expect(moves).toEqual([
          "agent.negotiation.propose by " + (gw === a ? "alpha" : "alpha@a.test"),
          "agent.negotiation.counter by " + (gw === a ? "beta@b.test" : "beta"),
          "agent.negotiation.accept by " + (gw === a ? "alpha" : "alpha@a.test"),
        ]),
      );
      expect((await verifyAudit(join(root, "collab"))).ok).toBe(true);
    }
  });

  it("refuses a counter-offer whose agreement signature is not the sender's home key; the session is unchanged", async () => {
    const proposed = await alpha.negotiations.propose("beta@b.test", { price: 10 });
    const id = proposed.sessionId;
    const held = (await atB(id, (v) => v.round === 1, "b.test holds the proposal")) as NegotiationView;
    const latest = held.latest as NonNullable<NegotiationView["latest"]>;

    // Signed as a message by beta's real key (so it passes the transfer's checks), but the agreement
    // it would become is signed by another key claiming to be beta's.
    const forger = createSigner(generateIdentity("beta", "principal-beta"));
    const message = buildNotification(
      { agentId: "beta@b.test", principalId: "principal-beta@b.test", layers: [0, 1, 2] },
      "alpha@a.test",
      {},
      { method: "agent.negotiation.counter" },
    );
    const headers = message.params.headers;
    headers["trust-layer-version"] = "1.0.0";
    const entry = {
      round: 2,
      by: "beta@b.test",
      terms: { price: 1 },
      messageId: headers["message-id"] as string,
      at: headers.timestamp,
    };
    const hash = roundHash(latest.hash, entry);
    message.params.body = {
      sessionId: id,
      round: 2,
      terms: entry.terms,
      historyHash: hash,
      agreementSignature: signAgreement(agreementDocument(held, { ...entry, hash }), forger),
    };
    const envelope = JSON.stringify(signMessage(message, betaReg.signer));
    const answer = await transferFrom(orgB, orgA, [envelope]);
    expect(answer.status).toBe(200);
    const [result] = answer.json.results as { outcome: string; error: { message: string; data: unknown } }[];
    expect(result?.outcome, JSON.stringify(result)).toBe("refused");
    expect(result?.error.message).toContain("agreementSignature");

    const after = await alpha.negotiations.get(id);
    expect(after).toMatchObject({ status: "open", round: 1, turn: "beta@b.test" });
    // The link and the session still work: beta's real counter goes through.
    await beta.negotiations.counter(id, { price: 12 });
    await atA(id, (v) => v.round === 2, "a.test applied beta's real counter");
    const rejected = await alpha.negotiations.reject(id, "too dear");
    expect(rejected.status).toBe("rejected");
    const agreementless: SignedAgreement | undefined = rejected.agreement;
    expect(agreementless).toBeUndefined();
    await atB(id, (v) => v.status === "rejected", "b.test applied alpha's rejection");
  });

  it("runs both parties' strategies to an agreement (negotiate and onProposal)", async () => {
    beta.negotiations.onProposal(({ offer }) =>
      Number(offer.price) >= 50 ? { accept: true } : { counter: { price: 60 } },
    );
    const done = await alpha.negotiations.negotiate("beta@b.test", { price: 40 }, ({ offer }) =>
      Number(offer.price) <= 55 ? { accept: true } : { counter: { price: 50 } },
    );
    expect(done.status).toBe("accepted");
    expect(done.agreement?.document.terms).toEqual({ price: 50 });
    const atBeta = await atB(done.sessionId, (v) => v.status === "accepted", "b.test holds the agreement");
    expect(atBeta?.agreement).toEqual(done.agreement);
  });
}
