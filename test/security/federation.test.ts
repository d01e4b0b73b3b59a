/**
 * What a federated peer could try (docs/federation.md, "What a peer cannot do"), replayed against
 * real gateways on 127.0.0.1 with TLS: a.test and b.test admit each other, c.test is admitted by
 * nobody. Each attack is a request on b.test's federation listener signed as the attacker can sign
 * it; each asserts the refusal (status, code, the field named), that beta received nothing and
 * nothing was stored, and that a.test's agent still reaches beta afterwards. The same attacks run
 * with b.test (and a.test) on the embedded store and on NATS, whose peers, deduplication and stored
 * messages are kept by other code.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { remoteSenderInbox } from "../../src/extensions/federation/directory.js";
import { GatewaySigner } from "../../src/extensions/federation/gateway-key.js";
import { requestSignatureInput } from "../../src/extensions/federation/peer-client.js";
import { buildNotification, type Signer, signMessage } from "../../src/protocol/index.js";
import { PeerHeader } from "../../src/wire/federation.js";
import {
  type FederatedGateway,
  type Organization,
  organization,
  removeOrganization,
  startFederatedGateway,
} from "../helpers/federation.js";
import { ADMIN_TOKEN, api, type TestAgent } from "../helpers/gateway.js";
import { describeWithNats, startNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { type RawResponse, rawRequest } from "./helpers.js";

/** b.test takes at most this many messages per second from one peer (burst twice that). */
const PEER_RATE = 20;

let orgA: Organization;
let orgB: Organization;
let orgC: Organization;
let a: FederatedGateway;
let b: FederatedGateway;
let c: FederatedGateway;
let alpha: AcpAgent;
let alphaAgent: TestAgent;
let carol: TestAgent;
let beta: AcpAgent;
const notes: Record<string, unknown>[] = [];
const tmp = useTmpDir("acp-fed-attack-");

/** The federation key a gateway signs with (read from its data directory, as its operator could). */
function keyOf(org: Organization): Promise<GatewaySigner> {
  return GatewaySigner.open(join(org.dir, "data"), org.domain);
}

interface Signed {
  origin: string;
  signer: GatewaySigner;
  destination?: string;
  date?: string;
  /** The body the signature covers, when the attacker sends another one. */
  signedBody?: string;
}

/** A request to b.test's federation listener, signed as `origin` with `signer`. */
function toB(
  method: "GET" | "POST",
  path: string,
  body: string | undefined,
  s: Signed,
): Promise<RawResponse> {
  const destination = s.destination ?? "b.test";
  const date = s.date ?? new Date().toISOString();
  const fullPath = `/federation/v1${path}`;
  const input = requestSignatureInput(
    method,
    fullPath,
    s.origin,
    destination,
    date,
    s.signedBody ?? body ?? "",
  );
  return rawRequest(`${orgB.url}${fullPath}`, {
    method,
    ...(body !== undefined && { body }),
    ca: readFileSync(orgB.ca),
    headers: {
      [PeerHeader.Origin]: s.origin,
      [PeerHeader.Destination]: destination,
      [PeerHeader.Date]: date,
      [PeerHeader.Signature]: s.signer.signatureOf(input),
    },
  });
}

/** A transfer of `messages` (serialized envelopes) to b.test, signed as `s` says. */
function transferToB(messages: string[], s: Signed): Promise<RawResponse> {
  return toB("POST", "/transfers", JSON.stringify({ messages }), s);
}

/** A notification signed by `signer` as `from` (with principal `principal`) to `to`. */
function note(signer: Signer, from: string, principal: string, to: string, body: Record<string, unknown>) {
  return JSON.stringify(
    signMessage(
      buildNotification({ agentId: from, principalId: principal, layers: [0, 1, 2] }, to, body),
      signer,
    ),
  );
}

function alphaNote(body: Record<string, unknown>, to = "beta@b.test"): string {
  return note(alphaAgent.signer, "alpha@a.test", "principal-alpha@a.test", to, body);
}

function errorOf(response: RawResponse): { code: number; message: string; data?: Record<string, unknown> } {
  return (JSON.parse(response.text) as { error: { code: number; message: string } }).error;
}

/** A transfer's per-message outcomes. */
function outcomes(response: RawResponse) {
  expect(response.status).toBe(200);
  return (
    JSON.parse(response.text) as { results: { outcome: string; error?: { code: number; data?: unknown } }[] }
  ).results;
}

/** Whether b.test stored a message of `from` with `id`. */
async function storedAtB(from: string, id: string): Promise<boolean> {
  return (await b.gateway.broker.status({ from: remoteSenderInbox(from), id }).catch(() => null)) !== null;
}

function idOf(envelope: string): string {
  return (JSON.parse(envelope) as { params: { headers: Record<string, string> } }).params.headers[
    "message-id"
  ] as string;
}

/**
 * Every attack, against b.test on the store `nats` gives (each call a NATS server's URL; the
 * embedded store when absent): its peers, deduplication, stored messages and queues live there.
 */
function attacks(nats?: () => Promise<string>): void {
  beforeAll(async () => {
    notes.length = 0;
    // On NATS, a.test and b.test each have a server of their own; c.test only signs requests.
    const [natsA, natsB] = nats ? await Promise.all([nats(), nats()]) : [];
    [orgA, orgB, orgC] = await Promise.all([
      organization("a.test"),
      organization("b.test"),
      organization("c.test"),
    ]);
    [a, b, c] = await Promise.all([
      startFederatedGateway(orgA, [orgB, orgC], natsA ? { natsUrl: natsA } : {}),
      startFederatedGateway(orgB, [orgA, orgC], {
        ...(natsB && { natsUrl: natsB }),
        federation: { domain: "b.test", peerRatePerSecond: PEER_RATE },
      }),
      startFederatedGateway(orgC, [orgA, orgB]),
    ]);
    await a.admit(orgB);
    await b.admit(orgA);
    await c.admit(orgB);
    const alphaReg = await a.agent("alpha");
    alpha = alphaReg.agent;
    alphaAgent = alphaReg.registered;
    carol = await c.register("carol", "principal-carol");
    beta = (await b.agent("beta")).agent;
    beta.onNotification((body) => {
      notes.push(body);
    });
    beta.onRequest("agent.request", (body) => ({ echo: body }));
    await alpha.handshake("beta@b.test");
  }, 120_000);

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), c?.close()]);
    for (const org of [orgA, orgB, orgC]) if (org) removeOrganization(org);
  });

  afterEach(async () => {
    // The gateways are healthy: a.test's agent still reaches beta through both gateways.
    expect(await alpha.request("beta@b.test", { still: "working" })).toEqual({ echo: { still: "working" } });
  });

  it("accepts a transfer a.test signs for its own agent (the baseline every attack differs from)", async () => {
    const envelope = alphaNote({ n: "baseline" });
    const answer = await transferToB([envelope], {
      origin: "a.test",
      signer: await keyOf(orgA),
    });
    expect(outcomes(answer)).toEqual([{ id: idOf(envelope), outcome: "accepted" }]);
    await until(
      () => notes.some((n) => n.n === "baseline"),
      (got) => got,
      "beta got the baseline",
    );
    // The same transfer again: stored once, delivered once.
    const again = await transferToB([envelope], {
      origin: "a.test",
      signer: await keyOf(orgA),
    });
    expect(outcomes(again)).toEqual([{ id: idOf(envelope), outcome: "duplicate" }]);
    expect(notes.filter((n) => n.n === "baseline")).toHaveLength(1);
  });

  it("refuses c.test, which b.test never admitted, even for its own agent", async () => {
    const envelope = note(carol.signer, "carol@c.test", "principal-carol@c.test", "beta@b.test", {
      n: "from-c",
    });
    const answer = await transferToB([envelope], {
      origin: "c.test",
      signer: await keyOf(orgC),
    });
    expect(answer.status).toBe(403);
    expect(errorOf(answer).code).toBe(-32011);
    expect(errorOf(answer).message).toContain("not a peer of b.test");
    expect(await storedAtB("carol@c.test", idOf(envelope))).toBe(false);
    // Nor may it look up b.test's agents.
    const lookup = await toB("GET", "/agents/beta", undefined, {
      origin: "c.test",
      signer: await keyOf(orgC),
    });
    expect(lookup.status).toBe(403);
    expect(lookup.text).not.toContain("principal-beta");
  });

  it("refuses c.test signing as a.test with its own key (a forged gateway key)", async () => {
    const envelope = alphaNote({ n: "forged-gateway" });
    const answer = await transferToB([envelope], {
      origin: "a.test",
      signer: await GatewaySigner.open(tmp(), "a.test"),
    });
    expect(answer.status).toBe(401);
    expect(errorOf(answer).code).toBe(-32010);
    expect(errorOf(answer).message).toMatch(/not a key of a\.test/);
    expect(await storedAtB("alpha@a.test", idOf(envelope))).toBe(false);
  });

  it("refuses a.test carrying a message of another domain's agent, or of b.test's own", async () => {
    const asCarol = note(carol.signer, "carol@c.test", "principal-carol@c.test", "beta@b.test", {
      n: "as-c",
    });
    const asLocal = note(carol.signer, "beta", "principal-beta", "beta@b.test", { n: "as-local" });
    const answer = await transferToB([asCarol, asLocal], {
      origin: "a.test",
      signer: await keyOf(orgA),
    });
    for (const result of outcomes(answer)) {
      expect(result.outcome).toBe("refused");
      expect(result.error?.code).toBe(-32011);
      expect(JSON.stringify(result.error?.data)).toContain("/params/headers/agent-id");
    }
    expect(await storedAtB("carol@c.test", idOf(asCarol))).toBe(false);
    expect(notes.some((n) => n.n === "as-c" || n.n === "as-local")).toBe(false);
  });

  it("refuses to relay to a third domain (no open relay)", async () => {
    const envelope = alphaNote({ n: "relay" }, "carol@c.test");
    const answer = await transferToB([envelope], {
      origin: "a.test",
      signer: await keyOf(orgA),
    });
    const [result] = outcomes(answer);
    expect(result?.outcome).toBe("refused");
    expect(result?.error?.code).toBe(-32007);
    expect(JSON.stringify(result?.error?.data)).toContain("/params/headers/recipient-id");
    expect(await storedAtB("alpha@a.test", idOf(envelope))).toBe(false);
    expect((await b.gateway.broker.usage("_fed_c_test").catch(() => undefined))?.pendingMessages ?? 0).toBe(
      0,
    );
  });

  it("refuses a message a.test's agent did not sign (a tampered or forged envelope)", async () => {
    const forged = note(carol.signer, "alpha@a.test", "principal-alpha@a.test", "beta@b.test", {
      n: "forged",
    });
    const tampered = alphaNote({ n: "original" }).replace('"original"', '"tampered"');
    const answer = await transferToB([forged, tampered], {
      origin: "a.test",
      signer: await keyOf(orgA),
    });
    const [first, second] = outcomes(answer);
    expect(first?.outcome).toBe("refused");
    expect([-32002, -32003]).toContain(first?.error?.code);
    expect(second?.outcome).toBe("refused");
    expect(second?.error?.code).toBe(-32002);
    expect(notes.some((n) => n.n === "forged" || n.n === "tampered")).toBe(false);
  });

  it("refuses a request whose body, date or destination is not what a.test signed", async () => {
    const signer = await keyOf(orgA);
    const envelope = alphaNote({ n: "swapped" });
    const body = JSON.stringify({ messages: [envelope] });
    const swapped = await toB("POST", "/transfers", body, {
      origin: "a.test",
      signer,
      signedBody: JSON.stringify({ messages: [alphaNote({ n: "signed" })] }),
    });
    expect(swapped.status).toBe(401);
    expect(errorOf(swapped).message).toContain("signature does not verify");
    const stale = await toB("POST", "/transfers", body, {
      origin: "a.test",
      signer,
      date: new Date(Date.now() - 10 * 60_000).toISOString(),
    });
    expect(stale.status).toBe(401);
    expect(errorOf(stale).message).toContain("5 minutes");
    const elsewhere = await toB("POST", "/transfers", body, {
      origin: "a.test",
      signer,
      destination: "c.test",
    });
    expect(elsewhere.status).toBe(403);
    expect(errorOf(elsewhere).message).toContain("not c.test");
    const unsigned = await rawRequest(`${orgB.url}/federation/v1/transfers`, {
      method: "POST",
      body,
      ca: readFileSync(orgB.ca),
    });
    expect(unsigned.status).toBe(401);
    expect(await storedAtB("alpha@a.test", idOf(envelope))).toBe(false);
  });

  it("bounds a transfer: too many messages, too many bytes", async () => {
    const signer = await keyOf(orgA);
    const many = Array.from({ length: 101 }, (_, i) => alphaNote({ n: `many-${i}` }));
    const tooMany = await transferToB(many, {
      origin: "a.test",
      signer,
    });
    expect(tooMany.status).toBe(400);
    expect(JSON.stringify(errorOf(tooMany).data)).toContain("/messages");
    const huge = JSON.stringify({ messages: [alphaNote({ n: "huge", pad: "x".repeat(9 * 1024 * 1024) })] });
    const tooBig = await toB("POST", "/transfers", huge, { origin: "a.test", signer });
    expect(tooBig.status).toBe(413);
    expect(notes.some((n) => typeof n.n === "string" && (n.n.startsWith("many-") || n.n === "huge"))).toBe(
      false,
    );
  });

  it("answers a peer the status of its own deliveries only, and no listing of agents", async () => {
    const signer = await keyOf(orgA);
    const status = await toB(
      "POST",
      "/status",
      JSON.stringify({ messages: [{ from: "carol@c.test", id: "message-0001" }] }),
      { origin: "a.test", signer },
    );
    expect(status.status).toBe(200);
    expect(JSON.parse(status.text).statuses).toEqual([
      { from: "carol@c.test", id: "message-0001", status: "unknown" },
    ]);
    const list = await toB("GET", "/agents", undefined, { origin: "a.test", signer });
    expect(list.status).toBe(404);
    const unknown = await toB("GET", "/agents/nobody", undefined, { origin: "a.test", signer });
    expect(unknown.status).toBe(404);
  });

  it("refuses a peer URL the outbound URL policy refuses, or plain http", async () => {
    for (const url of ["https://169.254.169.254", "http://203.0.113.7:8448"]) {
      const answer = await api(b.url, "/api/v1/federation/peers", {
        body: { domain: "d.test", url },
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(answer.status).toBe(400);
      expect(JSON.stringify(answer.json)).toContain('"path":"/url"');
    }
    const peers = await api(b.url, "/api/v1/federation/peers", {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect((peers.json.peers as { domain: string }[]).map((p) => p.domain)).toEqual(["a.test"]);
  });

  it("limits the messages a peer delivers per second (-32013, quota peer-rate)", async () => {
    const signer = await keyOf(orgA);
    const burst = Array.from({ length: 3 * PEER_RATE }, (_, i) => alphaNote({ n: `rate-${i}` }));
    const results = outcomes(await transferToB(burst, { origin: "a.test", signer }));
    const limited = results.filter((r) => r.outcome === "refused");
    expect(limited.length).toBeGreaterThanOrEqual(PEER_RATE - 5);
    for (const r of limited) {
      expect(r.error?.code).toBe(-32013);
      expect((r.error?.data as { quota?: string } | undefined)?.quota).toBe("peer-rate");
    }
    // What a.test's forwarder sends next is refused for now and sent again when the bucket refills.
  });
}

describe("federation: what a peer gateway cannot do", () => {
  attacks();
});

describeWithNats("federation: what a peer gateway cannot do, each gateway on its own NATS", () => {
  const servers: { dispose(): Promise<void> }[] = [];
  // Started once for the whole suite (as its gateways are), so not with useNatsServer's per-test clean-up.
  afterAll(async () => {
    await Promise.all(servers.splice(0).map((server) => server.dispose()));
  });
  attacks(async () => {
    const server = await startNatsServer();
    servers.push(server);
    return server.url;
  });
});
