/**
 * Organizations for federation tests: each a real gateway on 127.0.0.1 with its own data
 * directory, admin token and certificate authority; its federation listener serves TLS with a
 * certificate its CA signed, and it trusts the CAs of the organizations given (by configuration,
 * never the system store). openssl makes the certificates (missing openssl fails the test).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { AcpAgent, type AcpAgentOptions } from "../../src/client/index.js";
import { peerInbox } from "../../src/extensions/federation/directory.js";
import { GatewaySigner } from "../../src/extensions/federation/gateway-key.js";
import { requestSignatureInput } from "../../src/extensions/federation/peer-client.js";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import type { DefaultGatewayOptions } from "../../src/server.js";
import { FEDERATION_PREFIX, PeerHeader } from "../../src/wire/federation.js";
import { rawRequest } from "../security/helpers.js";
import {
  ADMIN_TOKEN,
  api,
  type BrokerKind,
  startTestGateway,
  type TestAgent,
  type TestGateway,
} from "./gateway.js";
import { type NatsServer, startNatsServer, useNatsServer } from "./nats.js";
import { freePort } from "./ports.js";
import { until } from "./until.js";

export interface Organization {
  domain: string;
  /** Its certificate authority (PEM file): what other organizations trust. */
  ca: string;
  tls: { cert: string; key: string };
  dir: string;
  /** Its federation listener's port (fixed, so a restarted gateway keeps its URL). */
  port: number;
  /** The URL peers reach it at (`https://127.0.0.1:<port>`). */
  url: string;
}

function openssl(args: string[]): void {
  execFileSync("openssl", args, { stdio: "ignore" });
}

/** A CA and a server certificate for 127.0.0.1 it signed, in a directory of the organization's own. */
export async function organization(domain: string): Promise<Organization> {
  const dir = mkdtempSync(join(tmpdir(), `acp-org-${domain}-`));
  const ca = join(dir, "ca.pem");
  const caKey = join(dir, "ca.key");
  const cert = join(dir, "fed.pem");
  const key = join(dir, "fed.key");
  const csr = join(dir, "fed.csr");
  const ext = join(dir, "fed.ext");
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  openssl([
    "req",
    "-x509",
    ...ec,
    "-keyout",
    caKey,
    "-out",
    ca,
    "-days",
    "1",
    "-subj",
    `/CN=${domain} test CA`,
  ]);
  openssl(["req", ...ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"]);
  writeFileSync(ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl([
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca,
    "-CAkey",
    caKey,
    "-CAcreateserial",
    "-out",
    cert,
    "-days",
    "1",
    "-extfile",
    ext,
  ]);
  const port = await freePort();
  return { domain, ca, tls: { cert, key }, dir, port, url: `https://127.0.0.1:${port}` };
}

export interface FederatedGateway extends TestGateway {
  org: Organization;
  /** Admits `other` as a peer (its URL; keys pinned at first contact). */
  admit(other: Organization): Promise<Record<string, unknown>>;
  /** Connects an SDK agent of this gateway (registered first). */
  agent(
    agentId: string,
    options?: Partial<AcpAgentOptions>,
  ): Promise<{ agent: AcpAgent; registered: TestAgent }>;
  /** Connects an SDK agent registered earlier (at this gateway, or before it restarted). */
  connect(registered: TestAgent, options?: Partial<AcpAgentOptions>): Promise<AcpAgent>;
}

/** What a test may set of a federated gateway, beyond what its organization gives it. */
export type FederatedGatewayOptions = Partial<DefaultGatewayOptions> & { natsUrl?: string; dataDir?: string };

/**
 * Starts `org`'s gateway trusting the CAs of `trusts`; its federation forwarders retry fast (tests
 * wait on events, and a stopped peer comes back within a second or so).
 */
export async function startFederatedGateway(
  org: Organization,
  trusts: Organization[],
  options: FederatedGatewayOptions = {},
): Promise<FederatedGateway> {
  const dataDir = options.dataDir ?? join(org.dir, "data");
  mkdirSync(dataDir, { recursive: true });
  const gw = await startTestGateway({
    dataDir,
    allowPrivateUrls: ["127.0.0.1"],
    ...options,
    federation: {
      domain: org.domain,
      listen: { host: "127.0.0.1", port: org.port },
      tls: org.tls,
      ca: trusts.map((t) => t.ca),
      retry: { initialMs: 100, maxMs: 500 },
      statusPollMs: 200,
      ...options.federation,
    },
  });
  const agents: AcpAgent[] = [];
  const connect = async (registered: TestAgent, agentOptions: Partial<AcpAgentOptions> = {}) => {
    const agent = new AcpAgent({
      gateway: gw.url,
      identity: registered.identity,
      apiKey: registered.apiKey,
      layers: [0, 1, 2],
      audit: false,
      state: false,
      ...agentOptions,
    });
    await agent.connect();
    agents.push(agent);
    return agent;
  };
  return {
    ...gw,
    org,
    async admit(other) {
      const res = await api(gw.url, "/api/v1/federation/peers", {
        body: { domain: other.domain, url: other.url },
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      if (res.status !== 201)
        throw new Error(`admit ${other.domain}: ${res.status} ${JSON.stringify(res.json)}`);
      return res.json;
    },
    async agent(agentId, agentOptions = {}) {
      const registered = await gw.register(agentId, `principal-${agentId}`);
      return { agent: await connect(registered, agentOptions), registered };
    },
    connect,
    async close() {
      await Promise.all(agents.map((a) => a.close().catch(() => undefined)));
      await gw.close();
    },
  };
}

export function removeOrganization(org: Organization): void {
  rmSync(org.dir, { recursive: true, force: true });
}

/**
 * Clean-up after each test of a federation file: `org(domain)` makes an organization whose
 * directory goes when the test ends, and `defer(...)` runs gateways' closes and the like then too,
 * the last registered first. `nats()` starts a nats-server that stops after those clean-ups, so
 * the gateways on it close while it still answers. `linkedPair()` starts a.test and b.test, each
 * admitting the other, closed when the test ends.
 */
export function useOrganizations(): {
  org(domain: string): Promise<Organization>;
  defer(...cleanups: (() => Promise<unknown> | unknown)[]): void;
  nats(): Promise<NatsServer>;
  linkedPair(options?: LinkedPairOptions): Promise<LinkedPair>;
} {
  // Registered first, so its servers stop after the afterEach below (hooks run last-in, first-out).
  const nats = useNatsServer();
  const pending: (() => Promise<unknown> | unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of pending.splice(0).reverse()) await cleanup();
  });
  const org = async (domain: string) => {
    const made = await organization(domain);
    pending.push(() => removeOrganization(made));
    return made;
  };
  const start = async (own: Organization, peer: Organization, options: FederatedGatewayOptions) => {
    const gw = await startFederatedGateway(own, [peer], options);
    pending.push(() => gw.close());
    return gw;
  };
  return {
    org,
    defer(...cleanups) {
      pending.push(...cleanups);
    },
    nats: () => nats(),
    async linkedPair({ broker = "embedded", a: aOptions = {}, b: bOptions = {} } = {}) {
      const [orgA, orgB] = await Promise.all([org("a.test"), org("b.test")]);
      if (broker === "nats") {
        const [natsA, natsB] = await Promise.all([nats(), nats()]);
        aOptions = { natsUrl: natsA.url, ...aOptions };
        bOptions = { natsUrl: natsB.url, ...bOptions };
      }
      const a = await start(orgA, orgB, aOptions);
      const b = await start(orgB, orgA, bOptions);
      for (const gw of [a, b]) expect(gw.gateway.context.broker.kind).toBe(broker);
      const admitted = { byA: await a.admit(orgB), byB: await b.admit(orgA) };
      return {
        orgA,
        orgB,
        a,
        b,
        admitted,
        startAgain: (side) => (side === "a" ? start(orgA, orgB, aOptions) : start(orgB, orgA, bOptions)),
      };
    },
  };
}

export interface LinkedPairOptions {
  /** Each gateway on the embedded store (the default), or each on a nats-server of its own. */
  broker?: BrokerKind;
  /** More options for a.test's gateway. */
  a?: FederatedGatewayOptions;
  /** More options for b.test's gateway. */
  b?: FederatedGatewayOptions;
}

export interface LinkedPair extends FederatedPair {
  /** What each gateway's admin API answered when it admitted the other (the keys it pinned). */
  admitted: { byA: Record<string, unknown>; byB: Record<string, unknown> };
  /**
   * Starts `side`'s gateway again (after the test closed it) as it was first started: same
   * organization, data directory, NATS and options; closed when the test ends.
   */
  startAgain(side: "a" | "b"): Promise<FederatedGateway>;
}

/**
 * alpha at a.test and beta at b.test (`betaOptions` for beta's SDK), registered and connected, and
 * alpha's handshake with beta@b.test done: where most tests of a linked pair begin.
 */
export async function handshakenAgents(
  pair: FederatedPair,
  betaOptions: Partial<AcpAgentOptions> = {},
): Promise<{ alpha: AcpAgent; alphaReg: TestAgent; beta: AcpAgent; betaReg: TestAgent }> {
  const { agent: alpha, registered: alphaReg } = await pair.a.agent("alpha");
  const { agent: beta, registered: betaReg } = await pair.b.agent("beta", betaOptions);
  await alpha.handshake("beta@b.test");
  return { alpha, alphaReg, beta, betaReg };
}

/**
 * A request to `target`'s federation listener signed as `origin` with that gateway's key (read from
 * its data directory, as its operator could): what a peer gateway sends, for tests that replay one.
 */
export async function signedPeerRequest(
  target: Organization,
  origin: Organization,
  method: "GET" | "POST",
  path: string,
  body?: string,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const signer = await GatewaySigner.open(join(origin.dir, "data"), origin.domain);
  const fullPath = `${FEDERATION_PREFIX}${path}`;
  const date = new Date().toISOString();
  const input = requestSignatureInput(method, fullPath, origin.domain, target.domain, date, body ?? "");
  const answer = await rawRequest(`${target.url}${fullPath}`, {
    method,
    ...(body !== undefined && { body }),
    ca: readFileSync(target.ca),
    headers: {
      [PeerHeader.Origin]: origin.domain,
      [PeerHeader.Destination]: target.domain,
      [PeerHeader.Date]: date,
      [PeerHeader.Signature]: signer.signatureOf(input),
    },
  });
  return { status: answer.status, json: JSON.parse(answer.text) as Record<string, unknown> };
}

/**
 * A transfer of `messages` (serialized envelopes) from `origin` to `target`'s federation listener,
 * signed with `origin`'s gateway key: the batch a peer's forwarder posts, for tests that replay one.
 */
export function transferFrom(
  origin: Organization,
  target: Organization,
  messages: string[],
): Promise<{ status: number; json: Record<string, unknown> }> {
  return signedPeerRequest(target, origin, "POST", "/transfers", JSON.stringify({ messages }));
}

/** `target` told, as `origin`'s gateway tells it, that these agents of `origin` changed. */
export function noticeFrom(
  origin: Organization,
  target: Organization,
  agents: string[],
): Promise<{ status: number; json: Record<string, unknown> }> {
  return signedPeerRequest(target, origin, "POST", "/notices", JSON.stringify({ agents }));
}

/**
 * A notification `{ n }` alpha@a.test signed (with the key `alpha` holds) for beta@b.test at `now`,
 * serialized: what a.test's forwarder carries to b.test.
 */
export function alphaNotification(alpha: TestAgent, n: number | string, now = new Date()): string {
  return JSON.stringify(
    signMessage(
      buildNotification(
        { agentId: "alpha@a.test", principalId: "principal-alpha@a.test", layers: [0, 1, 2] },
        "beta@b.test",
        { n },
        { now },
      ),
      alpha.signer,
    ),
  );
}

export interface FederatedPair {
  orgA: Organization;
  orgB: Organization;
  a: FederatedGateway;
  b: FederatedGateway;
}

/**
 * For a whole suite: a.test and b.test, each admitting the other, each gateway on the embedded store
 * or on a NATS of its own, started before the suite's tests (call the result in a `beforeAll`
 * registered after this) and stopped, with their servers and directories, after them.
 */
export function useFederatedPair(broker: BrokerKind): () => FederatedPair {
  let pair: FederatedPair | undefined;
  const orgs: Organization[] = [];
  const natsServers: Awaited<ReturnType<typeof startNatsServer>>[] = [];
  beforeAll(async () => {
    orgs.push(...(await Promise.all([organization("a.test"), organization("b.test")])));
    const [orgA, orgB] = orgs as [Organization, Organization];
    if (broker === "nats") natsServers.push(...(await Promise.all([startNatsServer(), startNatsServer()])));
    const natsUrl = (i: number) => (natsServers[i] ? { natsUrl: natsServers[i].url } : {});
    const [a, b] = await Promise.all([
      startFederatedGateway(orgA, [orgB], natsUrl(0)),
      startFederatedGateway(orgB, [orgA], natsUrl(1)),
    ]);
    pair = { orgA, orgB, a, b };
    for (const gw of [a, b]) expect(gw.gateway.context.broker.kind).toBe(broker);
    await a.admit(orgB);
    await b.admit(orgA);
  });
  afterAll(async () => {
    await Promise.all([pair?.a.close(), pair?.b.close()]);
    await Promise.all(natsServers.map((server) => server.dispose()));
    for (const org of orgs) removeOrganization(org);
  });
  return () => {
    if (!pair) throw new Error("the federated pair starts in the suite's beforeAll");
    return pair;
  };
}

/**
 * Waits until nothing waits in `gw`'s outbound queue for `domain`: e.g. after a handshake, whose
 * last messages (the capabilities) may still be on their way when the call returns.
 */
export async function peerQueueDrained(gw: TestGateway, domain: string): Promise<void> {
  await until(
    () => gw.gateway.broker.usage(peerInbox(domain)),
    (usage) => usage.pendingMessages === 0,
    `the queue for ${domain} drained`,
  );
}
