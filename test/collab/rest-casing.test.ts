import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, api, startTestGateway } from "../helpers/gateway.js";
import { useCollabBed } from "../helpers/collab-testbed.js";

/**
 * The collaboration records of the REST API in its one casing, snake_case, with the camelCase names
 * beside them for the deprecation period; what agents wrote (terms) and signed (envelopes) as they
 * were; the SDK reading them under its own names.
 */
describe("collaboration records in snake_case, the camelCase names deprecated", () => {
  const bed = useCollabBed((options) => startTestGateway(options));
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

  it("answers a negotiation in snake_case, its terms and envelopes untouched; the SDK reads its own names", async () => {
    const alice = await bed.member("alice");
    const bob = await bed.member("bob");
    const terms = { price_usd: 120, deliveryDate: "2026-03-01" };
    const proposed = await alice.collab.negotiations.propose("bob", terms);
    // The SDK's view keeps its TypeScript names.
    expect(proposed).toMatchObject({ sessionId: proposed.sessionId, maxRounds: expect.any(Number) });
    expect(proposed.latest?.terms).toEqual(terms);
    const path = `/api/v1/negotiations/${encodeURIComponent(proposed.sessionId)}`;
    const raw = (await api(bed.gw.url, path, { apiKey: bob.test.apiKey })).json;
    expect(raw).toMatchObject({
      session_id: proposed.sessionId,
      max_rounds: proposed.maxRounds,
      created_at: expect.any(String),
      expires_at: expect.any(String),
      proposer: { agent_id: "alice", principal_id: "principal-alice" },
      latest: { terms, agreement_signature: expect.any(String) },
    });
    // The deprecated names, beside them.
    expect(raw).toMatchObject({ sessionId: proposed.sessionId, proposer: { agentId: "alice" } });
    expect(raw.latest).not.toHaveProperty("terms.priceUsd");
    const history = (await api(bed.gw.url, `${path}/history`, { apiKey: bob.test.apiKey })).json as {
      rounds: { envelope: { params: { body: { terms: unknown } } } }[];
    };
    expect(history.rounds[0]?.envelope.params.body.terms).toEqual(terms);
    const list = await bob.collab.negotiations.list();
    expect(list.map((n) => n.sessionId)).toEqual([proposed.sessionId]);
  });

  it("takes a credit grant in snake_case and in camelCase; answers the movement in both", async () => {
    const boss = await bed.member("boss");
    const snake = await api(bed.gw.url, "/api/v1/ledger/grants", {
      headers: admin,
      body: { agent_id: "boss", amount: 5 },
    });
    expect(snake.status).toBe(201);
    expect(snake.json).toMatchObject({ balances: { boss: 5 } });
    const camel = await api(bed.gw.url, "/api/v1/ledger/grants", {
      headers: admin,
      body: { agentId: "boss", amount: 2 },
    });
    expect(camel.status).toBe(201);
    const bad = await api(bed.gw.url, "/api/v1/ledger/grants", {
      headers: admin,
      body: { agent_id: "nobody", amount: 2 },
    });
    expect(bad.json.error).toMatchObject({ data: { problems: [{ path: "/agent_id" }] } });
    const account = (await api(bed.gw.url, "/api/v1/ledger/boss", { apiKey: boss.test.apiKey })).json;
    expect(account).toMatchObject({ agent_id: "boss", agentId: "boss" });
    expect(await boss.collab.handoffs.balance()).toMatchObject({ agentId: "boss" });
  });

  it("answers a status with the presence in the agent record's snake_case", async () => {
    const alice = await bed.member("alice");
    await alice.collab.publishStatus({ state: "busy", activeTasks: 2 });
    const answer = (await api(bed.gw.url, "/api/v1/status/alice", { apiKey: alice.test.apiKey })).json;
    expect(answer).toMatchObject({
      agent_id: "alice",
      presence: { active_tasks: expect.any(Number), last_seen: expect.any(String) },
      // What the agent signed stays as it signed it.
      status: { agent_id: "alice", update: { state: "busy", activeTasks: 2 } },
    });
    expect(await alice.collab.status("alice")).toMatchObject({
      agentId: "alice",
      presence: { lastSeen: expect.any(String) },
    });
  });
});
