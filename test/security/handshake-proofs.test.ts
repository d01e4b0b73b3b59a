/**
 * `GET /api/v1/handshakes/:peer` serves an agent the peer's side of their handshake (the signed
 * announce and capabilities the gateway relayed to it), so an agent that lost its state can
 * re-establish it. Replayed: another agent asking for that proof, no credentials, the admin token,
 * and a gateway (here: a directory) handing the SDK a tampered proof. Each is refused, nothing
 * changes, and the gateway stays healthy; the SDK never trusts a proof that does not verify.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type AcpAgent, GatewayClient } from "../../src/client/index.js";
import type { HandshakeProofView } from "../../src/wire/api.js";
import { agentFor, eventually } from "../client/fixtures.js";
import { ADMIN_TOKEN, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-sec-proofs-");

describe("handshake proofs", () => {
  let gw: TestGateway;
  let alice: TestAgent;
  let bob: TestAgent;
  let carol: TestAgent;
  const agents: AcpAgent[] = [];
  beforeEach(async () => {
    gw = await startTestGateway();
    alice = await gw.register("alice-assistant", "alice");
    bob = await gw.register("bob-assistant", "bob");
    carol = await gw.register("carol-assistant", "carol");
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    await gw.close();
  });

  async function connected(who: TestAgent, options: Parameters<typeof agentFor>[3] = {}) {
    const agent = agentFor(gw, who, tmp(), { state: false, ...options });
    agents.push(agent);
    await agent.connect();
    return agent;
  }

  const get = (path: string, headers: Record<string, string>) =>
    fetch(`${gw.url}${path}`, { headers }).then(async (res) => ({
      status: res.status,
      json: (await res.json()) as { error: { code: number } } & Record<string, unknown>,
    }));

  it("only the recipient of a handshake reads the sender's side of it", async () => {
    const a = await connected(alice);
    await connected(bob);
    await a.handshake("bob-assistant");

    const own = await get("/api/v1/handshakes/alice-assistant", { "x-api-key": bob.apiKey });
    expect(own.status).toBe(200);
    expect((own.json as unknown as HandshakeProofView).announce).toMatchObject({ method: "agent.announce" });

    const stranger = await get("/api/v1/handshakes/alice-assistant", { "x-api-key": carol.apiKey });
    const nobody = await get("/api/v1/handshakes/nobody-here", { "x-api-key": carol.apiKey });
    expect(stranger.status).toBe(404);
    // Another's proof answers exactly as one that does not exist, but for the name asked about.
    expect(stranger.json.error.code).toBe(nobody.json.error.code);
    expect(JSON.stringify(stranger.json)).not.toContain("bob-assistant");
    expect((await get("/api/v1/handshakes/alice-assistant", {})).status).toBe(401);
    expect(
      (await get("/api/v1/handshakes/alice-assistant", { authorization: `Bearer ${ADMIN_TOKEN}` })).status,
    ).toBe(403);
    // Unchanged, and the gateway healthy.
    expect((await get("/api/v1/handshakes/alice-assistant", { "x-api-key": bob.apiKey })).json).toEqual(
      own.json,
    );
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });

  it("the SDK does not trust a tampered proof: it handshakes afresh with the sender instead", async () => {
    const a = await connected(alice);
    await connected(bob).then((b) => a.handshake("bob-assistant").then(() => b.close()));
    const real = new GatewayClient({ gateway: gw.url, apiKey: bob.apiKey });
    let served = 0;
    // A gateway that rewrites alice's capabilities (the signature no longer covers them).
    const directory = {
      getAgent: (id: string) => real.getAgent(id),
      updatePresence: (id: string, update: Parameters<GatewayClient["updatePresence"]>[1]) =>
        real.updatePresence(id, update),
      handshakeProof: async (peer: string) => {
        const proof = await real.handshakeProof(peer);
        if (!proof) return undefined;
        served++;
        const capabilities = structuredClone(proof.capabilities) as { params: { body: { tools: string[] } } };
        capabilities.params.body.tools = ["exfiltrate"];
        return { ...proof, capabilities };
      },
    };
    const b = await connected(bob, { directory });
    const seen: string[] = [];
    const errors: Error[] = [];
    b.on("error", (err) => errors.push(err));
    b.onNotification((_body, ctx) => {
      seen.push(JSON.stringify(ctx.handshake.capabilities?.tools ?? []));
    });
    await a.notify("bob-assistant", { n: 1 });
    await eventually(() => seen.length === 1, "handled after a fresh handshake");
    expect(served).toBe(1);
    expect(seen[0]).not.toContain("exfiltrate");
    expect(errors).toEqual([]);
  });
});
