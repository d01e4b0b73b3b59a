/**
 * Nobody fills the gateway's disk through the relay. Replayed: an agent queues 900 KB messages to
 * an offline recipient as fast as it can (it took 150 of them in 11 s), spreads them over several
 * recipients, and a stranger without a handshake sends a 64 KB `agent.announce`. Each is refused
 * with -32013 and `data.quota` naming the quota, nothing refused is stored, what was accepted
 * before is delivered, the room comes back as the recipient reads, and the gateway stays healthy.
 * On NATS the limit holds across two gateways. A gateway below its storage floor refuses new
 * messages (-32018) while deliveries and acknowledgements go on.
 */
import { statfsSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import type { GatewayQuotas } from "../../src/gateway/quotas.js";
import { buildAnnounce, buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { errorOf, handshake, submit } from "../helpers/messaging.js";
import { runAcp } from "../helpers/cli.js";
import {
  api,
  FrameClient,
  registerTestAgent,
  startTestGateway,
  type TestAgent,
  type TestGateway,
} from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { spawnGateway } from "../reliability/support/processes.js";

const BIG = 900_000;
const QUOTAS: GatewayQuotas = {
  recipientPendingMessages: 50,
  recipientPendingBytes: 4_000_000,
  senderStoredBytes: 6_000_000,
  handshakeBytes: 16_384,
};

const big = (from: TestAgent, to: string) => buildNotification(from.sender, to, { pad: "x".repeat(BIG) });

/** Submits 900 KB messages from `from` to `to` until one is refused; returns the accepted ids and the refusal. */
async function flood(gw: TestGateway, from: TestAgent, to: string, most = 20) {
  const accepted: string[] = [];
  for (let i = 0; i < most; i++) {
    const res = await submit(gw, from, big(from, to));
    if (res.status !== 202) return { accepted, refusal: res };
    accepted.push(res.json.id as string);
  }
  throw new Error(`${most} messages of ${BIG} bytes to ${to} were all accepted`);
}

/** Reads `count` deliveries on `ws` and acknowledges each; returns their ids. */
async function drain(ws: FrameClient, ids: string[]): Promise<void> {
  const want = new Set(ids);
  while (want.size > 0) {
    const frame = await ws.next("new_message");
    ws.send({ type: "acknowledge", id: frame.id, from: frame.from });
    want.delete(frame.id);
  }
}

function expectQuotaRefusal(
  res: { status: number; headers: Headers; json: Record<string, unknown> },
  quota: string,
  limit: number,
) {
  expect(res.status).toBe(429);
  expect(res.headers.get("retry-after")).toBe("30");
  const error = errorOf(res.json);
  expect(error.code).toBe(ErrorCode.RateLimited);
  expect(error.data).toMatchObject({ reason: "RateLimited", quota, limit, retryAfterSeconds: 30 });
  expect(error.data.used).toBeGreaterThan(0);
}

/** The attack and its aftermath, against `start()`'s gateway(s): the first does everything, a second (NATS) checks sharing. */
async function replay(gw: TestGateway, other?: TestGateway): Promise<void> {
  const mallory = await gw.register("mallory");
  const bob = await gw.register("bob");
  const alice = await gw.register("alice");
  const carol = await gw.register("carol");
  const eve = await gw.register("eve");
  await handshake(gw, mallory, bob);
  await handshake(gw, alice, bob);
  await handshake(gw, mallory, carol);

  // An offline recipient flooded: four 900 KB messages fit in its 4 MB, the fifth is refused.
  const toBob = await flood(gw, mallory, "bob");
  expect(toBob.accepted).toHaveLength(4);
  expectQuotaRefusal(toBob.refusal, "recipient-pending-bytes", 4_000_000);
  const refused = signMessage(big(mallory, "bob"), mallory.signer);
  expect((await api(gw.url, "/api/v1/messages", { apiKey: mallory.apiKey, body: refused })).status).toBe(429);
  // Nothing refused was stored.
  const lookup = await api(gw.url, `/api/v1/messages/${refused.params.headers["message-id"]}`, {
    apiKey: mallory.apiKey,
  });
  expect(lookup.status).toBe(404);

  // Spread over recipients: the sender's own stored bytes stop it (6 MB: two more).
  const toCarol = await flood(gw, mallory, "carol");
  expect(toCarol.accepted).toHaveLength(2);
  expectQuotaRefusal(toCarol.refusal, "sender-stored-bytes", 6_000_000);

  // A stranger (no handshake with bob) may announce itself, but not with 64 KB.
  const bigAnnounce = buildAnnounce(eve.sender, "bob", {
    capabilities: ["x"],
    purpose: "y".repeat(64 * 1024),
  });
  const announced = await submit(gw, eve, bigAnnounce);
  expect(announced.status).toBe(429);
  expect(errorOf(announced.json)).toMatchObject({
    code: ErrorCode.RateLimited,
    data: { quota: "handshake-bytes", limit: 16_384 },
  });
  expect(
    (await submit(gw, eve, buildAnnounce(eve.sender, "bob", { capabilities: ["x"], purpose: "hello" })))
      .status,
  ).toBe(202);

  // Another gateway on the same NATS refuses too, once it has heard of the usage.
  if (other) {
    await expect
      .poll(async () => (await other.gateway.broker.usage("bob")).pendingBytes, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(4 * BIG);
    expectQuotaRefusal(
      await submit(other, mallory, big(mallory, "bob")),
      "recipient-pending-bytes",
      4_000_000,
    );
  }

  const counted = await scrapeMetrics(gw.url);
  expect(counted.get('acp_quota_refusals_total{quota="recipient-pending-bytes"}')).toBeGreaterThanOrEqual(2);
  expect(counted.get('acp_quota_refusals_total{quota="sender-stored-bytes"}')).toBe(1);
  expect(counted.get('acp_quota_refusals_total{quota="handshake-bytes"}')).toBe(1);

  // Bob comes online (at the other gateway when there is one): everything accepted is delivered;
  // as he acknowledges, his room comes back.
  const bobWs = await FrameClient.connect((other ?? gw).gateway.wsUrl, bob.apiKey);
  await drain(bobWs, toBob.accepted);
  await expect
    .poll(async () => (await gw.gateway.broker.usage("bob")).pendingBytes, { timeout: 10_000 })
    .toBeLessThan(BIG);
  expect((await submit(gw, mallory, big(mallory, "bob"))).status).toBe(429); // mallory: still 6 MB stored
  expect((await submit(gw, alice, big(alice, "bob"))).status).toBe(202);
  await bobWs.close();
  expect((await api(gw.url, "/healthz")).status).toBe(200);
}

describe("quotas against a flood (embedded)", () => {
  const tmp = useTmpDir("acp-sec-quotas-");
  const gateways: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of gateways.splice(0)) await gw.close();
  });

  it("refuses past each quota with -32013 naming it, stores nothing refused, delivers what it accepted", async () => {
    const gw = await startTestGateway({ quotas: QUOTAS });
    gateways.push(gw);
    await replay(gw);
  }, 120_000);

  it("below the storage floor: new messages refused (-32018), deliveries and acknowledgements go on", async () => {
    const dataDir = tmp();
    const first = await startTestGateway({ dataDir });
    const alice = await first.register("alice");
    const bob = await first.register("bob");
    await handshake(first, alice, bob);
    const queued = await submit(first, alice, buildNotification(alice.sender, "bob", { n: 1 }));
    expect(queued.status).toBe(202);
    await first.close();

    // The same data directory, with a floor above the free space there is.
    const { bavail, bsize } = statfsSync(dataDir);
    const floor = bavail * bsize + 1024 ** 4;
    const full = await startTestGateway({ dataDir, quotas: { storageFloorBytes: floor } });
    gateways.push(full);
    const refused = await submit(full, alice, buildNotification(alice.sender, "bob", { n: 2 }));
    expect(refused.status).toBe(503);
    expect(errorOf(refused.json)).toMatchObject({
      code: ErrorCode.StorageUnavailable,
      data: {
        reason: "StorageUnavailable",
        quota: "storage-free-floor",
        limit: floor,
        retryAfterSeconds: 30,
      },
    });
    // Delivery and acknowledgement of what was stored before go on.
    const bobWs = await FrameClient.connect(full.gateway.wsUrl, bob.apiKey);
    await drain(bobWs, [queued.json.id as string]);
    await expect
      .poll(
        async () =>
          (await api(full.url, `/api/v1/messages/${queued.json.id}`, { apiKey: alice.apiKey })).json.status,
      )
      .toBe("acknowledged");
    await bobWs.close();
    const health = await api(full.url, "/healthz");
    expect(health.status).toBe(200);
    expect((health.json.warnings as Record<string, string>).storage).toContain("new messages refused");
    expect((await scrapeMetrics(full.url)).get('acp_quota_refusals_total{quota="storage-free-floor"}')).toBe(
      1,
    );
  }, 60_000);
});

describe("quotas of `acp gateway`", () => {
  const tmp = useTmpDir("acp-sec-quotas-cli-");

  it("takes each quota from its flag (0: off) and refuses a flag that is not a number", async () => {
    const gateway = await spawnGateway({
      cli: [
        "--data",
        tmp(),
        "--quota-recipient-messages",
        "3",
        "--quota-sender-bytes",
        "0",
        "--storage-floor",
        "0",
      ],
    });
    try {
      const gw = { url: gateway.url } as TestGateway;
      const alice = await registerTestAgent(gateway.url, "alice", "p-alice");
      const bob = await registerTestAgent(gateway.url, "bob", "p-bob");
      await handshake(gw, alice, bob); // two messages to bob: room for one more
      expect((await submit(gw, alice, buildNotification(alice.sender, "bob", { n: 1 }))).status).toBe(202);
      const refused = await submit(gw, alice, buildNotification(alice.sender, "bob", { n: 2 }));
      expectQuotaRefusal(refused, "recipient-pending-messages", 3);
    } finally {
      await gateway.stop();
    }
    const wrong = await runAcp(["gateway", "--data", tmp(), "--quota-recipient-bytes", "1GB"]);
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain("--quota-recipient-bytes must be a whole number");
  }, 60_000);
});

describeWithNats("quotas against a flood (NATS, two gateways)", () => {
  const startNats = useNatsServer();
  const tmp = useTmpDir("acp-sec-quotas-");
  const gateways: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of gateways.splice(0)) await gw.close();
  });

  it("refuses past each quota on either gateway, stores nothing refused, delivers what it accepted", async () => {
    const nats = await startNats();
    const a = await startTestGateway({ natsUrl: nats.url, dataDir: tmp(), quotas: QUOTAS });
    gateways.push(a);
    const b = await startTestGateway({ natsUrl: nats.url, dataDir: tmp(), quotas: QUOTAS });
    gateways.push(b);
    await replay(a, b);
  }, 120_000);

  it("below the storage floor of the JetStream account: new messages refused, deliveries go on", async () => {
    const nats = await startNats({
      config:
        "accounts { ACP: { jetstream: { max_file: 256MB, max_mem: 16MB }, users: [{ user: acp, password: acp }] } }\n",
    });
    const natsOptions = { servers: nats.url, user: "acp", pass: "acp" };
    const first = await startTestGateway({
      nats: natsOptions,
      dataDir: tmp(),
      quotas: { storageFloorBytes: 0 },
    });
    gateways.push(first);
    const alice = await first.register("alice");
    const bob = await first.register("bob");
    await handshake(first, alice, bob);
    const queued = await submit(first, alice, buildNotification(alice.sender, "bob", { n: 1 }));
    expect(queued.status).toBe(202);
    // A second gateway whose floor is above what the account's 256 MB limit leaves.
    const full = await startTestGateway({
      nats: natsOptions,
      dataDir: tmp(),
      quotas: { storageFloorBytes: 300 * 1024 * 1024 },
    });
    gateways.push(full);
    const refused = await submit(full, alice, buildNotification(alice.sender, "bob", { n: 2 }));
    expect(refused.status).toBe(503);
    expect(errorOf(refused.json).data).toMatchObject({ quota: "storage-free-floor" });
    const bobWs = await FrameClient.connect(full.gateway.wsUrl, bob.apiKey);
    await drain(bobWs, [queued.json.id as string]);
    await bobWs.close();
    await expect
      .poll(
        async () =>
          (await api(first.url, `/api/v1/messages/${queued.json.id}`, { apiKey: alice.apiKey })).json.status,
      )
      .toBe("acknowledged");
    // The first gateway, with no floor, still takes messages.
    expect((await submit(first, alice, buildNotification(alice.sender, "bob", { n: 3 }))).status).toBe(202);
  }, 60_000);
});
