/**
 * A task handoff from an agent of a.test to one of b.test: the escrow stays with the delegator's
 * gateway. a.test reserves it, holds it when beta accepts, and releases (or refunds) it as the
 * delegate's moves arrive over the link; b.test keeps a copy of the handoff for beta but no escrow
 * and no ledger movement of its own. A move by an agent that is no party is refused, the copy and
 * the escrow unchanged.
 */
import { describe, expect, it } from "vitest";
import { type AcpAgent, CollabClient } from "../../src/client/index.js";
import { CollabMethod } from "../../src/collab/index.js";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import {
  type FederatedGateway,
  handshakenAgents,
  transferFrom,
  useOrganizations,
} from "../helpers/federation.js";
import { ADMIN_TOKEN, api, type TestAgent } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

const { linkedPair } = useOrganizations();
const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };

const collabOf = (agent: AcpAgent, registered: TestAgent) =>
  new CollabClient({ agent, identity: registered.identity, apiKey: registered.apiKey, layers: [0, 1, 2] });

const ledger = async (gw: FederatedGateway, account: string) =>
  (await api(gw.url, `/api/v1/ledger/${encodeURIComponent(account)}`, admin)).json;

/** a.test and b.test admitting each other; alpha (100 credits) and beta, their handshake done. */
async function twoOrganizations() {
  const pair = await linkedPair();
  const { orgA, orgB, a, b } = pair;
  const agents = await handshakenAgents(pair);
  const alpha = collabOf(agents.alpha, agents.alphaReg);
  const beta = collabOf(agents.beta, agents.betaReg);
  const grant = await api(a.url, "/api/v1/ledger/grants", {
    ...admin,
    body: { agentId: "alpha", amount: 100 },
  });
  expect(grant.status).toBe(201);
  return { orgA, orgB, a, b, alpha, beta };
}

describe("federation: a handoff's escrow stays on the delegator's gateway", () => {
  it("is reserved, held and released (or refunded) at a.test as beta@b.test answers; b.test moves no credits", async () => {
    const { orgA, orgB, a, b, alpha, beta } = await twoOrganizations();

    const offered = await alpha.handoffs.offer(
      "beta@b.test",
      { completed: "collected availability", remaining: "book the slot", context: {} },
      { escrow: 40, title: "Booking" },
    );
    expect(offered).toMatchObject({ status: "offered", delegate: "beta@b.test", escrowState: "reserved" });
    expect(await ledger(a, "alpha")).toMatchObject({ balance: 60, escrowed: 40 });

    // b.test's copy, for beta: the same handoff, its escrow shown as the delegator's gateway keeps it.
    const atB = await until(
      () => api(b.url, `/api/v1/handoffs/${offered.handoffId}`, admin),
      (r) => r.status === 200,
      "b.test holds the offer for beta",
    );
    expect(atB.json).toMatchObject({
      delegator: "alpha@a.test",
      delegate: "beta",
      escrow: 40,
      status: "offered",
    });

    // Another agent of b.test accepting alpha's offer to beta (carried by b.test's key): refused
    // by a.test, whose copy and escrow stay as they were.
    const { agent: bob, registered: bobReg } = await b.agent("bob");
    await bob.handshake("alpha@a.test");
    const intruder = signMessage(
      buildNotification(
        { agentId: "bob@b.test", principalId: "principal-bob@b.test", layers: [0, 1, 2] },
        "alpha@a.test",
        { handoffId: offered.handoffId },
        { method: CollabMethod.handoffAccept },
      ),
      bobReg.signer,
    );
    const answer = await transferFrom(orgB, orgA, [JSON.stringify(intruder)]);
    expect(answer.json.results).toMatchObject([{ outcome: "refused", error: { code: -32016 } }]);
    expect(await alpha.handoffs.get(offered.handoffId)).toMatchObject({
      status: "offered",
      escrowState: "reserved",
    });

    await beta.handoffs.accept(offered.handoffId);
    await until(
      () => alpha.handoffs.get(offered.handoffId),
      (h) => h.status === "accepted" && h.escrowState === "held",
      "a.test holds the escrow once beta accepted",
    );
    await beta.handoffs.complete(offered.handoffId, { booked: "10:00" });
    const done = await until(
      () => alpha.handoffs.get(offered.handoffId),
      (h) => h.status === "completed",
      "a.test sees the task completed",
    );
    expect(done).toMatchObject({ escrowState: "released" });
    expect(await ledger(a, "alpha")).toMatchObject({ balance: 60, escrowed: 0 });
    // The credits are beta's at a.test, under its address: where the delegator's credits are.
    expect(await ledger(a, "beta@b.test")).toMatchObject({ balance: 40 });
    // A second offer beta declines: a.test refunds it to alpha.
    const second = await alpha.handoffs.offer(
      "beta@b.test",
      { completed: "-", remaining: "another slot", context: {} },
      { escrow: 10 },
    );
    expect(await ledger(a, "alpha")).toMatchObject({ balance: 50, escrowed: 10 });
    await until(
      () => api(b.url, `/api/v1/handoffs/${second.handoffId}`, admin),
      (r) => r.status === 200,
      "b.test holds the second offer",
    );
    await beta.handoffs.decline(second.handoffId, "fully booked");
    await until(
      () => alpha.handoffs.get(second.handoffId),
      (h) => h.status === "declined" && h.escrowState === "refunded",
      "a.test refunds the declined offer's escrow",
    );
    expect(await ledger(a, "alpha")).toMatchObject({ balance: 60, escrowed: 0 });
    // b.test kept no escrow and moved nothing.
    expect(await ledger(b, "beta")).toMatchObject({ balance: 0, escrowed: 0, movements: [] });
    expect(await ledger(b, "alpha@a.test")).toMatchObject({ balance: 0, escrowed: 0, movements: [] });
  });

  it("expires at both gateways on the offer's dates: a.test refunds, each tells only its own agent", async () => {
    const { a, b, alpha } = await twoOrganizations();
    const respondBy = new Date(Date.now() + 1_500).toISOString();
    const offered = await alpha.handoffs.offer(
      "beta@b.test",
      { completed: "-", remaining: "answer soon", context: {} },
      { escrow: 25, respondBy },
    );
    await until(
      () => api(b.url, `/api/v1/handoffs/${offered.handoffId}`, admin),
      (r) => r.status === 200,
      "b.test holds the offer",
    );
    const atA = await until(
      () => alpha.handoffs.get(offered.handoffId),
      (h) => h.status === "expired",
      "a.test expires the offer nobody answered",
      20_000,
    );
    expect(atA).toMatchObject({ escrowState: "refunded", expiry: { of: "offer" } });
    expect(await ledger(a, "alpha")).toMatchObject({ balance: 100, escrowed: 0 });
    const atB = await until(
      () => api(b.url, `/api/v1/handoffs/${offered.handoffId}`, admin),
      (r) => r.json.status === "expired",
      "b.test expires its copy too",
      20_000,
    );
    // b.test tells beta (when it is online); alpha is a.test's to tell.
    expect(atB.json.toTell ?? []).not.toContain("alpha@a.test");
    expect(atA.toTell ?? []).not.toContain("beta@b.test");
    expect(await ledger(b, "beta")).toMatchObject({ balance: 0, escrowed: 0, movements: [] });
  });
});
