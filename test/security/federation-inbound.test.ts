/**
 * The inbound bound per peer (docs/federation.md, "Policy"): b.test lets one peer's agents have at
 * most a few messages pending there. A flood from a.test, replayed as a signed transfer, is stored up
 * to the bound and refused past it with a retryable -32013; c.test's agent still reaches beta
 * meanwhile; what a.test's own forwarder was refused it sends again after its backoff, so once beta
 * takes its messages everything a.test's agent sent arrives, once. On the embedded store and on
 * NATS, whose change feed settles the count.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  alphaNotification,
  type FederatedGateway,
  startFederatedGateway,
  transferFrom,
  useOrganizations,
} from "../helpers/federation.js";
import { ADMIN_TOKEN, api, type TestAgent } from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { describeWithNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const { org, defer, nats } = useOrganizations();

/** What b.test lets one peer's agents have pending there. */
const BOUND = 3;

function lastErrorAt(gw: FederatedGateway) {
  return api(gw.url, "/api/v1/federation", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then(
    (r) => (r.json.peers as { link: { last_error: string | null } }[])[0]?.link.last_error ?? null,
  );
}

/** The flood and what follows it; `natsUrls`: a.test's and b.test's NATS (else the embedded store). */
async function floodFromOnePeer(natsUrls?: [string, string]): Promise<void> {
  const [orgA, orgB, orgC] = await Promise.all([org("a.test"), org("b.test"), org("c.test")]);
  const a = await startFederatedGateway(orgA, [orgB], natsUrls ? { natsUrl: natsUrls[0] } : {});
  defer(() => a.close());
  const b = await startFederatedGateway(orgB, [orgA, orgC], {
    ...(natsUrls && { natsUrl: natsUrls[1] }),
    federation: { domain: "b.test", peerInbound: { messages: BOUND } },
  });
  defer(() => b.close());
  const c = await startFederatedGateway(orgC, [orgB]);
  defer(() => c.close());
  await Promise.all([a.admit(orgB), b.admit(orgA), b.admit(orgC), c.admit(orgB)]);
  const { agent: alpha, registered: alphaReg } = await a.agent("alpha");
  const { agent: carol, registered: carolReg } = await c.agent("carol");
  const betaState = { state: { root: join(orgB.dir, "beta-state") } };
  const { agent: away, registered: betaReg } = await b.agent("beta", betaState);
  await alpha.handshake("beta@b.test");
  await carol.handshake("beta@b.test");
  // beta is away: what reaches b.test for it stays pending there.
  await away.close();

  // The flood, as a.test's key signs it: stored up to the bound, refused past it, for now.
  const flood = Array.from({ length: BOUND + 2 }, (_, i) => alphaNotification(alphaReg, `flood-${i}`));
  const answer = await transferFrom(orgA, orgB, flood);
  expect(answer.status).toBe(200);
  const results = answer.json.results as {
    outcome: string;
    error?: { code: number; data?: Record<string, unknown> };
  }[];
  expect(results.map((r) => r.outcome)).toEqual([...Array(BOUND).fill("accepted"), "refused", "refused"]);
  for (const refused of results.slice(BOUND)) {
    expect(refused.error?.code).toBe(-32013);
    expect(refused.error?.data).toMatchObject({
      quota: "peer-inbound-messages",
      limit: BOUND,
      used: BOUND,
      retryAfterSeconds: 30,
    });
  }

  const metrics = await scrapeMetrics(b.url);
  expect(metrics.get('acp_federation_inbound_pending{peer="a.test"}')).toBe(BOUND);

  // a.test's own forwarder is refused too: it keeps the message and backs off.
  const held = (await alpha.notify("beta@b.test", { n: "held" })).id;
  await until(
    () => lastErrorAt(a),
    (error) => error?.includes("again later") === true,
    "a.test's forwarder was told to send again later",
  );
  const alphaStatus = () => api(a.url, `/api/v1/messages/${held}/status`, { apiKey: alphaReg.apiKey });
  expect((await alphaStatus()).json).toMatchObject({ status: "queued", peer: "b.test" });

  // Another peer is not held back by a.test's flood.
  const fromCarol = (await carol.notify("beta@b.test", { n: "carol" })).id;
  await until(
    () => api(c.url, `/api/v1/messages/${fromCarol}/status`, { apiKey: carolReg.apiKey }),
    (r) => r.json.status === "forwarded",
    "carol's message is stored at b.test",
  );

  // beta comes back and takes what waits: a.test's pending falls, its forwarder's retry passes.
  const beta = await b.connect(betaReg as TestAgent, betaState);
  const got: string[] = [];
  beta.onNotification((body) => {
    got.push(body.n as string);
  });
  await until(
    () => alphaStatus(),
    (r) => r.json.status === "acknowledged",
    "the held message reached beta",
  );
  await until(
    () => got.length,
    (n) => n === BOUND + 2,
    "beta got every message stored for it",
  );
  expect([...got].sort()).toEqual(
    ["carol", "held", ...Array.from({ length: BOUND }, (_, i) => `flood-${i}`)].sort(),
  );
  await until(
    () => b.gateway.broker.usage("beta"),
    (usage) => usage.pendingMessages === 0,
    "beta acknowledged everything",
  );
  await until(
    async () => (await scrapeMetrics(b.url)).get('acp_federation_inbound_pending{peer="a.test"}') ?? 0,
    (pending) => pending === 0,
    "b.test counts nothing pending of a.test's any more",
  );
  // And b.test takes a.test's messages again as before.
  await alpha.notify("beta@b.test", { n: "after" });
  await until(
    () => got,
    (g) => g.includes("after"),
    "beta got a message sent after the flood",
  );
}

const TITLE =
  "refuses a peer's flood past its bound for now, leaves other peers unaffected, and loses nothing the peer's gateway sends again";

describe("federation: what one peer may have pending at a gateway", () => {
  it(TITLE, async () => {
    await floodFromOnePeer();
  });
});

describeWithNats(
  "federation: what one peer may have pending at a gateway on NATS (its change feed settles the count)",
  () => {
    it(TITLE, async () => {
      const [natsA, natsB] = await Promise.all([nats(), nats()]);
      await floodFromOnePeer([natsA.url, natsB.url]);
    });
  },
);
