import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { generateIdentity, publicIdentity, signHandover } from "../../src/protocol/index.js";
import {
  alphaNotification,
  handshakenAgents,
  noticeFrom,
  peerQueueDrained,
  transferFrom,
  useOrganizations,
} from "../helpers/federation.js";
import { ADMIN_TOKEN, api, type BrokerKind } from "../helpers/gateway.js";
import { describeWithNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const { linkedPair } = useOrganizations();
/**
 * Two gateways, one stopped and started again, dozens of signed messages: about 2 s on an idle
 * machine, but past the usual 30 s on a loaded 2-core one.
 */
const TWO_GATEWAYS = { timeout: 90_000 };

/** Notifications beta handles, by body `n`, in arrival order. */
function collect(agent: AcpAgent): number[] {
  const got: number[] = [];
  agent.onNotification((body) => {
    got.push(body.n as number);
  });
  return got;
}

/** Waits until each of `ids` reads acknowledged (at b.test) in its sender's `status`. */
async function acknowledged(
  ids: string[],
  status: (id: string) => Promise<{ json: Record<string, unknown> }>,
) {
  for (const id of ids) {
    await until(
      () => status(id),
      (r) => r.json.status === "acknowledged",
      `${id} acknowledged at b.test`,
    );
  }
}

describe("federation: store and forward", TWO_GATEWAYS, () => {
  it("queues messages while the peer is down and delivers each exactly once, in order, when it returns", async () => {
    const pair = await linkedPair();
    const { a } = pair;
    let { b } = pair;
    const betaState = { state: { root: join(pair.orgB.dir, "beta-state") } };
    const { alpha, alphaReg, betaReg } = await handshakenAgents(pair, betaState);

    await b.close();
    const sent: string[] = [];
    for (let n = 1; n <= 5; n++) sent.push((await alpha.notify("beta@b.test", { n })).id);
    const status = (id: string) => api(a.url, `/api/v1/messages/${id}/status`, { apiKey: alphaReg.apiKey });
    expect((await status(sent[0] as string)).json).toMatchObject({ status: "queued", peer: "b.test" });
    const link = await until(
      () => api(a.url, "/api/v1/federation", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      (r) => typeof (r.json.peers as { link: { lastError: unknown } }[])[0]?.link.lastError === "string",
      "a.test saw b.test unreachable",
    );
    expect((link.json.peers as { domain: string }[])[0]?.domain).toBe("b.test");

    b = await pair.startAgain("b");
    const beta = await b.connect(betaReg, betaState);
    const got = collect(beta);
    await acknowledged(sent, status);
    expect(got).toEqual([1, 2, 3, 4, 5]);
  });
});

describe("federation: a notice just before the peer goes down", TWO_GATEWAYS, () => {
  it("leaves the record a.test looked up in use, so messages for the peer's agent still queue", async () => {
    const pair = await linkedPair();
    const { orgA, orgB, a } = pair;
    let { b } = pair;
    const betaState = { state: { root: join(pair.orgB.dir, "beta-state") } };
    const { alpha, alphaReg, betaReg } = await handshakenAgents(pair, betaState);

    await b.close();
    // b.test told of a change to beta as it went down: a.test cannot fetch beta's record again.
    const notice = await noticeFrom(orgB, orgA, ["beta"]);
    expect(notice.status).toBe(200);
    const { id } = await alpha.notify("beta@b.test", { n: 1 });
    const status = (messageId: string) =>
      api(a.url, `/api/v1/messages/${messageId}/status`, { apiKey: alphaReg.apiKey });
    expect((await status(id)).json).toMatchObject({ status: "queued", peer: "b.test" });

    b = await pair.startAgain("b");
    const beta = await b.connect(betaReg, betaState);
    const got = collect(beta);
    await acknowledged([id], status);
    expect(got).toEqual([1]);
  });
});

/**
 * a.test's queue for b.test holds 3 messages at most: with b.test down, a fourth is refused with
 * -32013 and nothing stored; the three arrive when b.test returns, and the queue takes more.
 */
async function queueBound(broker: BrokerKind): Promise<void> {
  const pair = await linkedPair({
    broker,
    a: { federation: { domain: "a.test", peerQueue: { messages: 3 } } },
  });
  const { a } = pair;
  let { b } = pair;
  const betaState = { state: { root: join(pair.orgB.dir, "beta-state") } };
  const { alpha, alphaReg, betaReg } = await handshakenAgents(pair, betaState);
  // What the handshake itself sent (its last steps, the capabilities) has left a.test's queue.
  await peerQueueDrained(a, "b.test");

  await b.close();
  const sent: string[] = [];
  for (let n = 1; n <= 3; n++) sent.push((await alpha.notify("beta@b.test", { n })).id);
  const refused = await alpha.notify("beta@b.test", { n: 4 }).then(
    () => undefined,
    (err: { code?: number; message: string; data?: Record<string, unknown> }) => err,
  );
  expect(refused?.code).toBe(-32013);
  expect(refused?.message).toContain("b.test");
  expect(refused?.data).toMatchObject({ quota: "peer-queue-messages", limit: 3, used: 3 });
  expect(JSON.stringify(refused?.data)).toContain("/params/headers/recipient-id");
  const status = (id: string) => api(a.url, `/api/v1/messages/${id}/status`, { apiKey: alphaReg.apiKey });
  for (const id of sent) expect((await status(id)).json).toMatchObject({ status: "queued", peer: "b.test" });

  b = await pair.startAgain("b");
  const beta = await b.connect(betaReg, betaState);
  const got = collect(beta);
  await acknowledged(sent, status);
  await peerQueueDrained(a, "b.test");
  await alpha.notify("beta@b.test", { n: 5 });
  await until(
    () => got.length,
    (n) => n === 4,
    "beta got the notification sent once the queue drained",
  );
  expect(got).toEqual([1, 2, 3, 5]);
}

describe("federation: a peer's outbound queue is bounded", TWO_GATEWAYS, () => {
  it("refuses a sender's message past the bound with -32013 while the peer is down, keeps what it queued, and takes more once it drained", async () => {
    await queueBound("embedded");
  });
});

describeWithNats("federation: a pair of gateways on NATS", () => {
  it("bounds a peer's outbound queue on NATS as on the embedded store", TWO_GATEWAYS, async () => {
    await queueBound("nats");
  });

  it(
    "handshakes and exchanges a request and response, each gateway on its own NATS",
    TWO_GATEWAYS,
    async () => {
      const { a, b } = await linkedPair({ broker: "nats" });
      const { agent: alpha } = await a.agent("alpha");
      const { agent: beta } = await b.agent("beta");
      beta.onRequest("agent.request", (body, context) => ({ echo: body, from: context.from }));
      const notes = collect(beta);

      expect((await alpha.handshake("beta@b.test")).state).toBe("established");
      expect(await alpha.request("beta@b.test", { n: 1 })).toEqual({ echo: { n: 1 }, from: "alpha@a.test" });
      await alpha.notify("beta@b.test", { n: 7 }, { encrypt: true });
      await until(
        () => notes.length,
        (n) => n === 1,
        "beta got the encrypted notification",
      );
      expect(notes).toEqual([7]);
    },
  );
});

/**
 * A linked pair with alpha@a.test and beta@b.test handshaken and alpha's first notification
 * (`n: 1`) delivered: where each identity-lifecycle case starts.
 */
async function firstNotificationDelivered() {
  const pair = await linkedPair();
  const agents = await handshakenAgents(pair);
  const got = collect(agents.beta);
  await agents.alpha.notify("beta@b.test", { n: 1 });
  await until(
    () => got.length,
    (n) => n === 1,
    "beta got alpha's first notification",
  );
  return { ...pair, ...agents, got };
}

describe("federation: identity lifecycle across the link", () => {
  it("a revocation at a.test reaches b.test, which refuses the revoked agent from then on", async () => {
    const { orgA, orgB, a, b, alphaReg, betaReg, got } = await firstNotificationDelivered();

    const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    expect((await api(a.url, "/api/v1/agents/alpha/revoke", { ...admin, body: {} })).status).toBe(200);
    // b.test hears of it (a notice, then its own lookup of alpha's signed record) and shows it.
    await until(
      () => api(b.url, "/api/v1/agents/alpha%40a.test", { apiKey: betaReg.apiKey }),
      (r) => typeof r.json.revokedAt === "string",
      "b.test shows alpha revoked",
    );
    // A message alpha signed, carried by a.test's key (a replay, or a.test's operator), is refused.
    const answer = await transferFrom(orgA, orgB, [alphaNotification(alphaReg, 2)]);
    expect(answer.status).toBe(200);
    const [result] = answer.json.results as { outcome: string; error: { code: number; message: string } }[];
    expect(result?.outcome).toBe("refused");
    expect(result?.error.message).toContain("revoked");
    expect(got).toEqual([1]);
  });

  it("a notice b.test cannot follow up (a.test went down) keeps b.test from taking the agent's messages on the record it had", async () => {
    const { orgA, orgB, a, alphaReg, got } = await firstNotificationDelivered();

    await a.close();
    // a.test told of a change to alpha (a revocation, say) and cannot be reached to say which.
    const notice = await noticeFrom(orgA, orgB, ["alpha"]);
    expect(notice.status).toBe(200);
    const answer = await transferFrom(orgA, orgB, [alphaNotification(alphaReg, 2)]);
    expect(answer.status).toBe(200);
    const [result] = answer.json.results as { outcome: string; error: { message: string } }[];
    expect(result?.outcome).toBe("refused");
    expect(result?.error.message).toContain("cannot look up alpha@a.test");
    expect(got).toEqual([1]);
  });

  it("a signing key rotated at a.test reaches b.test; what the earlier key signed before still verifies", async () => {
    const { orgA, orgB, a, b, alpha, alphaReg, betaReg, got } = await firstNotificationDelivered();
    const beforeRotation = new Date();

    const next = generateIdentity("alpha", "principal-alpha");
    const nextSigning = publicIdentity(next).signing;
    // A handover the new key signed itself proves nothing: refused, nothing changes.
    const selfSigned = await api(a.url, "/api/v1/agents/alpha/keys", {
      apiKey: alphaReg.apiKey,
      body: { signing: nextSigning, handover: signHandover(next, nextSigning) },
    });
    expect(selfSigned.status).toBe(401);
    expect(JSON.stringify(selfSigned.json)).toContain('"path":"/handover"');
    const rotated = await api(a.url, "/api/v1/agents/alpha/keys", {
      apiKey: alphaReg.apiKey,
      body: { signing: nextSigning, handover: signHandover(alphaReg.identity, nextSigning) },
    });
    expect(rotated.status).toBe(200);
    expect(rotated.json.keyHistory).toHaveLength(1);
    await alpha.close();
    // b.test hears of it (a notice) and reads alpha's record again from a.test's signed directory.
    const view = await until(
      () => api(b.url, "/api/v1/agents/alpha%40a.test", { apiKey: betaReg.apiKey }),
      (r) => (r.json.signing as { x: string }).x === nextSigning.x,
      "b.test shows alpha's new key",
    );
    expect(view.json.keyHistory).toHaveLength(1);

    // A message the earlier key signed before the rotation, still on its way, is accepted (its
    // handshake stands until the pair handshakes again); one it signs now is not.
    const answer = await transferFrom(orgA, orgB, [
      alphaNotification(alphaReg, 3, beforeRotation),
      alphaNotification(alphaReg, 4),
    ]);
    const [inTransit, late] = answer.json.results as { outcome: string; error?: { code: number } }[];
    expect(inTransit?.outcome).toBe("accepted");
    expect(late?.outcome).toBe("refused");
    expect(late?.error?.code).toBe(-32003);

    const renewed = { ...alphaReg, identity: { ...alphaReg.identity, signing: next.signing } };
    const alpha2 = await a.connect(renewed);
    await alpha2.handshake("beta@b.test");
    await alpha2.notify("beta@b.test", { n: 2 });
    await until(
      () => got,
      (n) => n.includes(2),
      "beta got the notification signed by the new key",
    );
  });
});
