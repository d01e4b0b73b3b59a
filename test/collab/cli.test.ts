import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import { partyOf, type SignedAgreement, signAgreement } from "../../src/collab/index.js";
import { writeIdentityFile } from "../../src/identity/index.js";
import { createSigner, generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { agentFor } from "../client/fixtures.js";
import { runAcp } from "../helpers/cli.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

/** An agreement built and signed the way the gateway and SDK do it, without a gateway. */
function signedAgreement(): {
  agreement: SignedAgreement;
  alice: ReturnType<typeof generateIdentity>;
  bob: ReturnType<typeof generateIdentity>;
} {
  const alice = generateIdentity("alice", "alice-principal");
  const bob = generateIdentity("bob", "bob-principal");
  const document = {
    type: "acp.agreement" as const,
    version: 1 as const,
    sessionId: "session-0001",
    parties: [partyOf(alice), partyOf(bob)] as [ReturnType<typeof partyOf>, ReturnType<typeof partyOf>],
    terms: { price: 120, currency: "credits" },
    round: 2,
    historyHash: "A".repeat(43),
    offeredBy: "bob",
    offeredAt: "2026-02-14T12:00:00.000Z",
  };
  const signatures = [alice, bob].map((identity) => {
    const signer = createSigner(identity);
    return { kid: signer.kid, signature: signAgreement(document, signer) };
  });
  return { agreement: { document, signatures }, alice, bob };
}

describe("acp agreement verify (offline)", () => {
  const tmp = useTmpDir("acp-collab-cli-");

  it("accepts an agreement both parties signed, and refuses a tampered one naming the signatures", async () => {
    const dir = tmp();
    const { agreement, alice } = signedAgreement();
    const file = join(dir, "agreement.json");
    writeFileSync(file, JSON.stringify(agreement));
    const ok = await runAcp(["agreement", "verify", file]);
    expect(ok.stderr).toBe("");
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain("valid agreement of negotiation session-0001");
    expect(ok.stdout).toContain("alice (principal alice-principal) and bob (principal bob-principal)");

    const tampered = structuredClone(agreement);
    tampered.document.terms.price = 12;
    writeFileSync(file, JSON.stringify(tampered));
    const bad = await runAcp(["agreement", "verify", file, "--json"]);
    expect(bad.code).toBe(1);
    const check = JSON.parse(bad.stdout) as { valid: boolean; problems: { path: string; message: string }[] };
    expect(check.valid).toBe(false);
    expect(check.problems.map((p) => p.path)).toEqual(["/signatures/0", "/signatures/1"]);
    expect(check.problems[0]?.message).toMatch(/alice's signature does not match the document/);

    // Pinned to a known public key, a file listing another key for alice fails even though it is self-consistent.
    writeFileSync(file, JSON.stringify(agreement));
    const other = join(dir, "alice.pub.json");
    writeFileSync(other, JSON.stringify(publicIdentity(generateIdentity("alice", "alice-principal"))));
    const pinned = await runAcp(["agreement", "verify", file, "--key", other]);
    expect(pinned.code).toBe(1);
    expect(pinned.stderr).toContain("/document/parties/0/signing: is not the public key given for alice");
    const mine = join(dir, "alice-real.pub.json");
    writeFileSync(mine, JSON.stringify(publicIdentity(alice)));
    expect((await runAcp(["agreement", "verify", file, "--key", mine])).code).toBe(0);
  });

  it("names the file and the field when the input is not an agreement", async () => {
    const dir = tmp();
    const file = join(dir, "not-an-agreement.json");
    writeFileSync(file, JSON.stringify({ document: { type: "acp.agreement" }, signatures: [] }));
    const r = await runAcp(["agreement", "verify", file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file}: the agreement does NOT verify`);
    expect(r.stderr).toMatch(/\/document\/version/);
    const missing = await runAcp(["agreement", "verify", join(dir, "nope.json")]);
    expect(missing.stderr).toMatch(/cannot read .*nope\.json: ENOENT/);
  });
});

// Each test spawns the real binary several times; on a busy 2-core machine that takes a while.
describe("acp negotiate, handoff, team, vote, knowledge against a gateway", { timeout: 90_000 }, () => {
  const tmp = useTmpDir("acp-collab-cli-");
  let gw: TestGateway;
  let dir: string;
  let env: Record<string, string>;
  let bob: CollabClient;
  const closers: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    dir = tmp();
    gw = await startTestGateway({ dataDir: join(dir, "gateway") });
    const alice = await gw.register("alice", "alice-principal", { capabilities: [] });
    const bobAgent = await gw.register("bob", "bob-principal", { capabilities: ["translate"] });
    await writeIdentityFile(join(dir, "alice.key.json"), alice.identity);
    env = { ACP_GATEWAY: gw.url, ACP_KEY: join(dir, "alice.key.json"), ACP_API_KEY: alice.apiKey };
    // Bob is online through the SDK, so alice's CLI can handshake with him.
    const agent = agentFor(gw, bobAgent, join(dir, "bob"));
    await agent.connect();
    closers.push(() => agent.close());
    bob = new CollabClient({ agent, identity: bobAgent.identity, apiKey: bobAgent.apiKey });
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await gw.close();
  });

  const acp = (args: string[]) => runAcp(args, { env, cwd: dir, timeoutMs: 30_000 });

  it("proposes from the CLI, saves the agreement bob accepted, and verifies it offline", async () => {
    const bad = await acp(["negotiate", "propose", "--to", "bob", "--terms", "{price: 5}"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--terms: not valid JSON/);
    const proposed = await acp([
      "negotiate",
      "propose",
      "--to",
      "bob",
      "--terms",
      '{"price":5}',
      "--subject",
      "logo",
      "--json",
    ]);
    expect(proposed.stderr.replace(/warning:.*\n/g, "")).toBe("");
    expect(proposed.code, proposed.stderr).toBe(0);
    const session = JSON.parse(proposed.stdout) as { sessionId: string; status: string; turn: string };
    expect(session).toMatchObject({ status: "open", turn: "bob" });
    await bob.negotiations.accept(session.sessionId);
    const file = join(dir, "agreement.json");
    const saved = await acp(["negotiate", "agreement", session.sessionId, "--out", file]);
    expect(saved.stdout).toContain(`agreement written to ${file}`);
    expect(JSON.parse(readFileSync(file, "utf8")).document.terms).toEqual({ price: 5 });
    const verified = await acp(["agreement", "verify", file]);
    expect(verified.code, verified.stderr).toBe(0);
    const shown = await acp(["negotiate", "show", session.sessionId]);
    expect(shown.stdout).toContain(`negotiation ${session.sessionId} (logo): accepted`);
    const outOfTurn = await acp(["negotiate", "counter", session.sessionId, "--terms", '{"price":6}']);
    expect(outOfTurn.code).toBe(1);
    expect(outOfTurn.stderr).toMatch(/is accepted; nothing can follow \[-32017 Conflict\]/);
  });

  it("grants credits, refuses a handoff naming the missing capability, then offers one with escrow", async () => {
    const grant = await acp([
      "handoff",
      "grant",
      "--to",
      "alice",
      "--amount",
      "50",
      "--admin-token",
      gw.adminToken,
    ]);
    expect(grant.stdout).toContain("granted 50 credits to alice; balance now 50");
    const refused = await acp([
      "handoff",
      "offer",
      "--to",
      "bob",
      "--remaining",
      "review the draft",
      "--requires",
      "review",
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      "bob did not register the capability review this handoff requires [-32022 CapabilityMissing]",
    );
    const offered = await acp([
      "handoff",
      "offer",
      "--to",
      "bob",
      "--remaining",
      "translate chapter 1",
      "--requires",
      "translate",
      "--escrow",
      "20",
      "--title",
      "ch1",
      "--context",
      '{"lang":"fr"}',
    ]);
    expect(offered.code, offered.stderr).toBe(0);
    expect(offered.stdout).toContain("escrow    20 credits, reserved");
    const balance = await acp(["handoff", "balance"]);
    expect(balance.stdout).toContain(
      "alice: 30 credits; 20 in escrow for tasks you delegated; 0 held for you",
    );
    const badEscrow = await acp(["handoff", "offer", "--to", "bob", "--remaining", "x", "--escrow", "-3"]);
    expect(badEscrow.stderr).toContain("--escrow must be a whole number from 0 to 1000000000, not -3");
  });

  it("creates a team, posts, opens a vote and casts a ballot, publishes and finds knowledge", async () => {
    expect((await acp(["team", "create", "studio", "--name", "Studio", "--member", "bob"])).stdout).toMatch(
      /team alice\.studio \(Studio\)[\s\S]*members {2}alice, bob/,
    );
    const posted = await acp(["team", "post", "alice.studio", "--text", "hello bob"]);
    expect(posted.stdout).toMatch(/posted .* to alice\.studio\/general: delivered to bob/);
    expect((await acp(["team", "messages", "alice.studio"])).stdout).toMatch(/alice \[message\]: hello bob/);
    const badRule = await acp([
      "vote",
      "open",
      "--team",
      "alice.studio",
      "--question",
      "?",
      "--option",
      "a",
      "--option",
      "b",
      "--rule",
      "plurality",
      "--period",
      "1h",
    ]);
    expect(badRule.stderr).toContain(
      "--rule must be one of majority, supermajority, unanimity, quorum, not plurality",
    );
    const opened = await acp([
      "vote",
      "open",
      "--team",
      "alice.studio",
      "--question",
      "Logo colour?",
      "--option",
      "red",
      "--option",
      "blue",
      "--rule",
      "quorum",
      "--quorum",
      "0.5",
      "--period",
      "1h",
      "--json",
    ]);
    expect(opened.code, opened.stderr).toBe(0);
    const voteId = (JSON.parse(opened.stdout) as { voteId: string }).voteId;
    expect((await acp(["vote", "cast", voteId, "blue"])).stdout).toContain(`voted blue in ${voteId}`);
    expect((await acp(["vote", "cast", voteId, "red"])).stdout).toContain(
      `changed your ballot to red in ${voteId}`,
    );
    expect((await acp(["vote", "show", voteId])).stdout).toContain("ballots   1 of 2, yours: red");
    const published = await acp([
      "knowledge",
      "publish",
      "--team",
      "alice.studio",
      "--title",
      "Brand colours",
      "--content",
      "Primary red, secondary navy.",
      "--tag",
      "brand",
    ]);
    expect(published.stdout).toMatch(/published .* "Brand colours" to alice\.studio/);
    const found = await acp(["knowledge", "search", "navy", "--team", "alice.studio"]);
    expect(found.stdout).toContain("Brand colours  [brand] by alice");
    expect(found.stdout).toContain("[navy]");
    const none = await acp(["knowledge", "search", "purple", "--team", "alice.studio"]);
    expect(none.stdout).toContain("no entries match");
  });
});
