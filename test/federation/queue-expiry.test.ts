/**
 * A message whose retention ends while it waits in a peer's outbound queue (the peer down) ends
 * `expired` at the sender's gateway, exactly as one whose local recipient never came back, and is
 * never sent when the peer returns.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { remoteSenderInbox } from "../../src/extensions/federation/directory.js";
import { handshakenAgents, useOrganizations } from "../helpers/federation.js";
import { api, type BrokerKind } from "../helpers/gateway.js";
import { describeWithNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const { linkedPair } = useOrganizations();

/** a.test keeps messages this long: the queued one expires while b.test is down. */
const RETENTION_MS = 3_000;

async function expiresInQueue(broker: BrokerKind): Promise<void> {
  const pair = await linkedPair({ broker, a: { retentionMs: RETENTION_MS } });
  const { a } = pair;
  let { b } = pair;
  const betaState = { state: { root: join(pair.orgB.dir, "beta-state") } };
  const { alpha, alphaReg, betaReg } = await handshakenAgents(pair, betaState);
  const { agent: gamma } = await a.agent("gamma");
  await alpha.handshake("gamma");
  await gamma.close();
  await b.close();

  // One message to beta, queued for b.test, and one to gamma, an agent here that stays away.
  const remote = (await alpha.notify("beta@b.test", { n: 1 })).id;
  const local = (await alpha.notify("gamma", { n: 1 })).id;
  const status = (id: string) => api(a.url, `/api/v1/messages/${id}/status`, { apiKey: alphaReg.apiKey });
  expect((await status(remote)).json).toMatchObject({ status: "queued", peer: "b.test" });
  await until(
    () => api(a.url, "/api/v1/federation", { headers: { authorization: `Bearer ${a.adminToken}` } }),
    (r) => typeof (r.json.peers as { link: { last_error: unknown } }[])[0]?.link.last_error === "string",
    "a.test's forwarder tried b.test and failed",
  );
  const expired = await until(
    () => status(remote),
    (r) => r.json.status === "expired",
    "the queued message reads expired at a.test",
  );
  const expiredLocally = await until(
    () => status(local),
    (r) => r.json.status === "expired",
    "the local message reads expired",
  );
  // The sender sees what it sees of a local message that expired: the status, when, no dead letter
  // (retention took the envelope, so the recipient is named by its domain only).
  expect(expired.json).toMatchObject({ to: "@b.test", peer: "b.test", status: "expired" });
  for (const view of [expired.json, expiredLocally.json]) {
    expect(typeof view.expired_at).toBe("string");
    expect(view.dead_letter).toBeUndefined();
    expect(view.forwarded_at).toBeUndefined();
  }

  b = await pair.startAgain("b");
  const beta = await b.connect(betaReg, betaState);
  const got: number[] = [];
  beta.onNotification((body) => {
    got.push(body.n as number);
  });
  // The queue is in order: once a later message arrived, the expired one was passed over for good.
  const later = (await alpha.notify("beta@b.test", { n: 2 })).id;
  await until(
    () => status(later),
    (r) => r.json.status === "acknowledged",
    "the later message acknowledged at b.test",
  );
  expect(got).toEqual([2]);
  expect(await b.gateway.broker.status({ from: remoteSenderInbox("alpha@a.test"), id: remote })).toBeNull();
  expect((await status(remote)).json).toMatchObject({ status: "expired", peer: "b.test" });
  // Nothing stays counted in b.test's queue here (on NATS the settlement's count follows the ack).
  await until(
    () => a.gateway.broker.usage("_fed_b_test"),
    (u) => u.pendingMessages === 0,
    "a.test's queue for b.test counts nothing",
  );
}

describe("federation: a message that expires in a peer's outbound queue", () => {
  it("reads expired at the sender's gateway, as a local one does, and is never delivered when the peer returns", async () => {
    await expiresInQueue("embedded");
  });
});

describeWithNats("federation: a message that expires in a peer's outbound queue, on NATS", () => {
  it("reads expired at the sender's gateway and is never delivered when the peer returns", async () => {
    await expiresInQueue("nats");
  });
});
