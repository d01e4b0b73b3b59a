import { describe, expect, it } from "vitest";
import { verifyAuditRoot } from "../../src/audit/index.js";
import type { AcpAgent, AcpAgentOptions } from "../../src/client/index.js";
import { checkSignature } from "../../src/extensions/dashboard/detail.js";
import type { Registry } from "../../src/gateway/registry.js";
import {
  buildNotification,
  generateIdentity,
  publicIdentity,
  type SenderIdentity,
  type Signer,
  signHandover,
  signMessage,
} from "../../src/protocol/index.js";
import { handshakenAgents, startFederatedGateway, useOrganizations } from "../helpers/federation.js";
import { ADMIN_TOKEN, api, type TestAgent } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

const { org, defer, linkedPair } = useOrganizations();

const tempDir = useTmpDir("acp-key-history-");

/** Beta's state and audit kept on disk, so a restarted beta keeps its handshakes and its log. */
function durable(): Partial<AcpAgentOptions> & { auditRoot: string } {
  const auditRoot = tempDir();
  return { state: { root: tempDir() }, audit: { root: auditRoot }, auditRoot };
}

/** Notifications an agent handles, by body `n`, in arrival order. */
function collect(agent: AcpAgent): number[] {
  const got: number[] = [];
  agent.onNotification((body) => {
    got.push(body.n as number);
  });
  return got;
}

/** Rotates `agent`'s signing key at its gateway (the handover signed by its current key); the new identity. */
async function rotate(url: string, agent: TestAgent): Promise<TestAgent> {
  const next = generateIdentity(agent.identity.agentId, agent.identity.principalId);
  const signing = publicIdentity(next).signing;
  const answer = await api(url, `/api/v1/agents/${agent.identity.agentId}/keys`, {
    apiKey: agent.apiKey,
    body: { signing, handover: signHandover(agent.identity, signing) },
  });
  expect(answer.status).toBe(200);
  return { ...agent, identity: { ...agent.identity, signing: next.signing } };
}

/** A notification signed by `signer` as `sender`, stamped `now`. */
function signedNotification(sender: SenderIdentity, signer: Signer, to: string, now: Date) {
  return signMessage(buildNotification(sender, to, { n: 0 }, { now }), signer);
}

/** What a verifier concludes today of a message signed by the earlier key, before and after the rotation. */
async function expectEarlierKeyHonoured(
  registry: Registry,
  signedBefore: ReturnType<typeof signedNotification>,
  signedAfter: ReturnType<typeof signedNotification>,
): Promise<void> {
  const before = await checkSignature(registry, signedBefore);
  expect(before).toMatchObject({ result: "verified" });
  expect(before.detail).toContain("an earlier key, replaced by");
  const after = await checkSignature(registry, signedAfter);
  expect(after).toMatchObject({ result: "unknown-key" });
  expect(after.detail).toContain("no registered public key");
}

describe("key history: what an earlier key signed while it was current still verifies", () => {
  it("on one gateway: a message queued before the sender's rotation reaches the recipient's SDK after it", async () => {
    const gw = await startFederatedGateway(await org("a.test"), []);
    defer(() => gw.close());
    const { auditRoot, ...betaOptions } = durable();
    const { agent: alpha, registered: alphaReg } = await gw.agent("alpha");
    const { agent: beta, registered: betaReg } = await gw.agent("beta", betaOptions);
    await alpha.handshake("beta");
    const beforeRotation = new Date();
    await beta.close();
    await alpha.notify("beta", { n: 1 });
    await alpha.close();

    await rotate(gw.url, alphaReg);
    // beta's SDK verifies the queued message against alpha's key history (its registry entry).
    const beta2 = await gw.connect(betaReg, betaOptions);
    const got = collect(beta2);
    await until(
      () => got.length,
      (n) => n === 1,
      "beta got the message signed before the rotation",
    );
    expect(got).toEqual([1]);

    // Beta's audit, written across the rotation, is intact and holds the message as received.
    const [verification] = await verifyAuditRoot({ root: auditRoot, agent: "beta" });
    expect(verification).toMatchObject({ ok: true });
    await beta2.close();
    // The dashboard's re-check of a stored signature honours the history the same way.
    const registry = gw.gateway.context.registry;
    await expectEarlierKeyHonoured(
      registry,
      signedNotification(alphaReg.sender, alphaReg.signer, "beta", beforeRotation),
      signedNotification(alphaReg.sender, alphaReg.signer, "beta", new Date()),
    );
  });

  it("across a federation link: b.test's SDK and dashboard verify alpha@a.test's earlier key from its directory record", async () => {
    const pair = await linkedPair();
    const { a, b } = pair;
    const { auditRoot, ...betaOptions } = durable();
    const { alpha, alphaReg, beta, betaReg } = await handshakenAgents(pair, betaOptions);
    const beforeRotation = new Date();
    await beta.close();
    const { id } = await alpha.notify("beta@b.test", { n: 1 });
    // Stored at b.test for beta (offline) before alpha rotates.
    await until(
      () => api(a.url, `/api/v1/messages/${id}/status`, { apiKey: alphaReg.apiKey }),
      (r) => r.json.status === "forwarded" || r.json.status === "delivered",
      "a.test forwarded alpha's message to b.test",
    );
    await alpha.close();

    const renewed = await rotate(a.url, alphaReg);
    await until(
      () => api(b.url, "/api/v1/agents/alpha%40a.test", { apiKey: betaReg.apiKey }),
      (r) => (r.json.signing as { x: string }).x === renewed.identity.signing.x,
      "b.test shows alpha's new key",
    );
    const beta2 = await b.connect(betaReg, betaOptions);
    const got = collect(beta2);
    await until(
      () => got.length,
      (n) => n === 1,
      "beta got the message alpha signed before its rotation",
    );
    const [verification] = await verifyAuditRoot({ root: auditRoot, agent: "beta" });
    expect(verification).toMatchObject({ ok: true });

    const remoteAlpha = { agentId: "alpha@a.test", principalId: "principal-alpha@a.test", layers: [0, 1, 2] };
    await expectEarlierKeyHonoured(
      b.gateway.context.registry,
      signedNotification(remoteAlpha, alphaReg.signer, "beta@b.test", beforeRotation),
      signedNotification(remoteAlpha, alphaReg.signer, "beta@b.test", new Date()),
    );
  });

  it("a key revoked (not rotated) verifies nothing, not even what it signed before", async () => {
    const gw = await startFederatedGateway(await org("a.test"), []);
    defer(() => gw.close());
    const { auditRoot: _auditRoot, ...betaOptions } = durable();
    const { agent: alpha, registered: alphaReg } = await gw.agent("alpha");
    const { agent: beta, registered: betaReg } = await gw.agent("beta", betaOptions);
    await alpha.handshake("beta");
    const beforeRevocation = new Date();
    await beta.close();
    const { id } = await alpha.notify("beta", { n: 1 });
    await alpha.close();
    const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    expect((await api(gw.url, "/api/v1/agents/alpha/revoke", { ...admin, body: {} })).status).toBe(200);

    const beta2 = await gw.connect(betaReg, betaOptions);
    const got = collect(beta2);
    // beta's SDK refuses it: a revoked agent has no key, current or earlier; it ends a dead letter.
    const status = await until(
      () => api(gw.url, `/api/v1/messages/${id}/status?from=alpha`, { apiKey: betaReg.apiKey }),
      (r) => r.json.status === "failed",
      "beta refused the revoked agent's message",
    );
    expect(JSON.stringify(status.json)).toContain("no registered public key alpha#");
    expect(got).toEqual([]);
    // The dashboard still checks it against the revoked agent's key, and says it was revoked.
    const signed = signedNotification(alphaReg.sender, alphaReg.signer, "beta", beforeRevocation);
    expect((await checkSignature(gw.gateway.context.registry, signed)).detail).toContain("revoked");
    expect(got).toEqual([]);
  });
});
