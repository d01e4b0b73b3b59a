/**
 * The open federation policy (docs/federation.md, "Policy"): a.test admits any domain whose
 * `/.well-known/acp` verifies, at first contact, without an admin adding it. Its configuration says
 * where b.test's and c.test's gateways are (`resolve`, as `--federation-resolve` does), so first
 * contact reaches them on 127.0.0.1 over TLS. Open is not unguarded: a request signed by a key that
 * is not the domain's own is refused, and so is a domain the admin blocked, with nothing stored and
 * a.test still serving its peers afterwards.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { remoteSenderInbox } from "../../src/extensions/federation/directory.js";
import { GatewaySigner } from "../../src/extensions/federation/gateway-key.js";
import { requestSignatureInput } from "../../src/extensions/federation/peer-client.js";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import { FEDERATION_PREFIX, PeerHeader } from "../../src/wire/federation.js";
import {
  type FederatedGateway,
  type Organization,
  signedPeerRequest,
  startFederatedGateway,
  transferFrom,
  useOrganizations,
} from "../helpers/federation.js";
import { ADMIN_TOKEN, api, type TestAgent } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { rawRequest } from "./helpers.js";

const { org, defer } = useOrganizations();
const tmp = useTmpDir("acp-fed-open-");
const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };

interface Open {
  orgA: Organization;
  orgB: Organization;
  orgC: Organization;
  a: FederatedGateway;
  b: FederatedGateway;
  c: FederatedGateway;
  alpha: AcpAgent;
  beta: AcpAgent;
  /** What alpha received, by body `n`. */
  got: unknown[];
}

/** a.test open (b.test and c.test resolved to their listeners); b.test admits a.test; c.test nobody. */
async function openOrganizations(): Promise<Open> {
  const [orgA, orgB, orgC] = await Promise.all([org("a.test"), org("b.test"), org("c.test")]);
  const a = await startFederatedGateway(orgA, [orgB, orgC], {
    federation: { domain: "a.test", open: true, resolve: { "b.test": orgB.url, "c.test": orgC.url } },
  });
  defer(() => a.close());
  const b = await startFederatedGateway(orgB, [orgA]);
  defer(() => b.close());
  const c = await startFederatedGateway(orgC, [orgA]);
  defer(() => c.close());
  await b.admit(orgA);
  const { agent: alpha } = await a.agent("alpha");
  const { agent: beta } = await b.agent("beta");
  const got: unknown[] = [];
  alpha.onNotification((body) => {
    got.push(body.n);
  });
  alpha.onRequest("agent.request", (body, context) => ({ echo: body, from: context.from }));
  beta.onRequest("agent.request", (body) => ({ echo: body }));
  return { orgA, orgB, orgC, a, b, c, alpha, beta, got };
}

async function peersOf(gw: FederatedGateway) {
  const answer = await api(gw.url, "/api/v1/federation/peers", admin);
  return answer.json.peers as { domain: string; state: string; admitted_by: string; pinned_keys: string[] }[];
}

/** A transfer to a.test's federation listener signed as `origin` by `signer` (the attacker's key). */
function transferToA(o: Open, origin: string, signer: GatewaySigner, body: string) {
  const path = `${FEDERATION_PREFIX}/transfers`;
  const date = new Date().toISOString();
  return rawRequest(`${o.orgA.url}${path}`, {
    method: "POST",
    body,
    ca: readFileSync(o.orgA.ca),
    headers: {
      [PeerHeader.Origin]: origin,
      [PeerHeader.Destination]: "a.test",
      [PeerHeader.Date]: date,
      [PeerHeader.Signature]: signer.signatureOf(
        requestSignatureInput("POST", path, origin, "a.test", date, body),
      ),
    },
  });
}

/** carol@c.test's signed notification to alpha@a.test. */
function carolNote(carol: TestAgent, n: string): { envelope: string; id: string } {
  const message = signMessage(
    buildNotification(
      { agentId: "carol@c.test", principalId: "principal-carol@c.test", layers: [0, 1, 2] },
      "alpha@a.test",
      { n },
    ),
    carol.signer,
  );
  return { envelope: JSON.stringify(message), id: message.params.headers["message-id"] as string };
}

/** a.test still serves its peers: beta reaches alpha, and alpha beta. */
async function healthy(o: Open): Promise<void> {
  expect(await o.beta.request("alpha@a.test", { still: "working" })).toEqual({
    echo: { still: "working" },
    from: "beta@b.test",
  });
  expect(await o.alpha.request("beta@b.test", { back: true })).toEqual({ echo: { back: true } });
}

describe("federation: the open policy", () => {
  it("admits a domain at first contact, at the URL the configuration resolves it to, with the keys its own document shows", async () => {
    const o = await openOrganizations();
    expect(await peersOf(o.a)).toEqual([]);

    // b.test's agent contacts a.test first: a.test reads b.test's document where `resolve` says.
    expect((await o.beta.handshake("alpha@a.test")).state).toBe("established");
    const [peer] = await peersOf(o.a);
    const bKey = await GatewaySigner.open(`${o.orgB.dir}/data`, "b.test");
    expect(peer).toMatchObject({ domain: "b.test", state: "allowed", admitted_by: "open-policy" });
    expect(peer?.pinned_keys).toEqual([bKey.kid]);
    expect((await api(o.a.url, "/api/v1/federation/peers", admin)).json).toMatchObject({
      peers: [{ url: o.orgB.url }],
    });
    await o.beta.notify("alpha@a.test", { n: 1 });
    await until(
      () => o.got,
      (got) => got.includes(1),
      "alpha got beta's notification",
    );
    await healthy(o);
  });

  it("still refuses a forged gateway key and a blocked domain; nothing is stored and its peers are still served", async () => {
    const o = await openOrganizations();
    await o.beta.handshake("alpha@a.test");
    const carol = await o.c.register("carol", "principal-carol");

    // A key c.test never published, for c.test's first contact: a.test pins c.test's own keys
    // from its document, and the request signed by the other key is refused.
    const forger = await GatewaySigner.open(tmp(), "c.test");
    const forged = carolNote(carol, "forged");
    const refused = await transferToA(o, "c.test", forger, JSON.stringify({ messages: [forged.envelope] }));
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text).error).toMatchObject({ code: -32010 });
    expect(JSON.parse(refused.text).error.message).toMatch(/not a key of c\.test/);
    const cKey = await GatewaySigner.open(`${o.orgC.dir}/data`, "c.test");
    const cPeer = (await peersOf(o.a)).find((p) => p.domain === "c.test");
    expect(cPeer?.pinned_keys).toEqual([cKey.kid]);
    expect(cPeer?.pinned_keys).not.toContain(forger.kid);
    // The same forgery as b.test, a peer already admitted: refused too.
    const asB = await transferToA(o, "b.test", await GatewaySigner.open(tmp(), "b.test"), "{}");
    expect(asB.status).toBe(401);

    // The admin blocks c.test: its own, correctly signed transfer and lookup are refused, open or not.
    expect((await api(o.a.url, "/api/v1/federation/peers/c.test/block", { ...admin, body: {} })).status).toBe(
      200,
    );
    const blocked = carolNote(carol, "blocked");
    const transfer = await transferFrom(o.orgC, o.orgA, [blocked.envelope]);
    expect(transfer.status).toBe(403);
    expect(transfer.json.error).toMatchObject({ code: -32011 });
    expect((transfer.json.error as { message: string }).message).toContain("c.test is blocked");
    const lookup = await signedPeerRequest(o.orgA, o.orgC, "GET", "/agents/alpha");
    expect(lookup.status).toBe(403);
    expect(JSON.stringify(lookup.json)).not.toContain("principal-alpha");
    // Blocked stays blocked: first contact under the open policy does not admit it again.
    expect((await peersOf(o.a)).find((p) => p.domain === "c.test")?.state).toBe("blocked");

    for (const { id } of [forged, blocked]) {
      expect(await o.a.gateway.broker.status({ from: remoteSenderInbox("carol@c.test"), id })).toBeNull();
    }
    expect(o.got).toEqual([]);
    await healthy(o);
  });
});
