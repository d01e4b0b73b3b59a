import { readFile } from "node:fs/promises";
import { expect, it } from "vitest";
import { GatewayClient, type ResubmitInfo } from "../../src/client/index.js";
import type { GatewayOptions } from "../../src/gateway/index.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { startAnswerDroppingProxy } from "./answer-dropping-proxy.js";
import { agentFor, deferred, duplicateSubmissions, eventually, type GatewayFactory } from "./fixtures.js";
import { useTestbed } from "./testbed.js";

/**
 * Resending submissions and the persisted delivery ledger, against a real in-process gateway on
 * each broker. The faults that need a separate gateway process (kill -9, a full disk, a dying
 * nats-server) are in resubmit-*.test.ts.
 */
export function resubmitSuite(makeGateway: GatewayFactory): void {
  const t = useTestbed(makeGateway);

  /** Replaces the testbed's gateway by one with these options, alice and bob registered again. */
  async function gatewayWith(options: Partial<GatewayOptions> & { dataDir?: string }): Promise<void> {
    await t.gw.close();
    t.gw = await t.makeGateway(options);
    t.cleanups.push(() => t.gw.close());
    t.alpha = await t.gw.register("alice-assistant", "alice");
    t.beta = await t.gw.register("bob-assistant", "bob");
  }

  it("a rate-limited submission is sent again after its Retry-After, and delivered once", async () => {
    await gatewayWith({ limits: { ratePerSecond: 4, burst: 4 } });
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const handled = new Map<string, number>();
    bob.onNotification((_body, ctx) => {
      handled.set(ctx.messageId, (handled.get(ctx.messageId) ?? 0) + 1);
    });
    const resubmits: ResubmitInfo[] = [];
    alice.on("resubmit", (info) => resubmits.push(info));
    await alice.handshake("bob-assistant"); // two of alice's four tokens
    const sent = await Promise.all(
      Array.from({ length: 8 }, (_, n) => alice.notify("bob-assistant", { n }, { timeoutMs: 30_000 })),
    );
    const ids = sent.map((s) => s.id);
    expect(new Set(ids).size).toBe(8);
    const limited = resubmits.filter((r) => r.cause === "RateLimited");
    expect(limited.length).toBeGreaterThan(0);
    // The gateway's Retry-After (whole seconds) is waited out as given, not replaced by a backoff.
    expect(new Set(limited.map((r) => r.delayMs))).toEqual(new Set([1000]));
    await eventually(() => ids.every((id) => handled.has(id)), "all eight handled");
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
  });

  it("a submission stored but unanswered is sent again, settles as a duplicate, and is handled once", async () => {
    const proxy = await startAnswerDroppingProxy(Number(new URL(t.gw.url).port));
    t.cleanups.push(() => proxy.close());
    const alice = agentFor({ url: proxy.url }, t.alpha, t.dir);
    const resubmits: ResubmitInfo[] = [];
    alice.on("resubmit", (info) => resubmits.push(info));
    await alice.connect();
    t.cleanups.push(() => alice.close());
    const bob = await t.connected(t.beta);
    const handled: string[] = [];
    bob.onNotification((_body, ctx) => {
      handled.push(ctx.messageId);
    });
    await alice.handshake("bob-assistant");
    const duplicatesBefore = await duplicateSubmissions(t.gw.url);

    proxy.swallowAnswers();
    const sending = alice.notify("bob-assistant", { pay: "invoice 7" });
    await eventually(() => handled.length === 1, "the gateway stored it and bob handled it");
    proxy.cut(); // alice never heard back: for her, the outcome is unknown
    const { id } = await sending;

    expect(handled).toEqual([id]);
    expect(resubmits).toEqual([{ messageId: id, attempt: 2, cause: "connection-lost", delayMs: 0 }]);
    expect(await duplicateSubmissions(t.gw.url)).toBe(duplicatesBefore + 1);
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
    expect(handled).toEqual([id]);
  });

  it("a refusal that is not retryable fails at once, without a resend", async () => {
    await gatewayWith({ limits: { maxEnvelopeBytes: 4096 } });
    const alice = await t.connected(t.alpha);
    await t.connected(t.beta);
    const resubmits: ResubmitInfo[] = [];
    alice.on("resubmit", (info) => resubmits.push(info));
    await alice.handshake("bob-assistant");
    await expect(alice.notify("bob-assistant", { text: "x".repeat(6000) })).rejects.toMatchObject({
      code: ErrorCode.PayloadTooLarge,
      data: { limit: 4096 },
    });
    expect(resubmits).toEqual([]);
  });

  it("an agent restarted after its handler ran, before the gateway saw the ack, does not run it again", async () => {
    const dataDir = t.tmp();
    // A short ack wait: the gateway redelivers the unacknowledged message soon after its restart.
    const delivery = { ackWaitMs: 300, maxDeliver: 5, backoffFactor: 1 };
    await gatewayWith({ dataDir, delivery });
    const port = Number(new URL(t.gw.url).port);
    const alice = await t.connected(t.alpha);
    const aliceGaveUp: string[] = [];
    alice.on("disconnected", (info) => {
      if (!info.willReconnect) aliceGaveUp.push(`${info.code} ${info.reason}`);
    });
    const bobFirst = await t.connected(t.beta);
    const release = deferred();
    let firstRuns = 0;
    bobFirst.onNotification(async () => {
      firstRuns++;
      await release.promise;
    });
    await alice.handshake("bob-assistant");
    // Bob acknowledges each handshake message once its record is on disk: wait for those acks, so
    // the notification is the only delivery the gateway's stop leaves unacknowledged.
    const bobsView = new GatewayClient({ gateway: t.gw.url, apiKey: t.beta.apiKey });
    await eventually(
      async () => (await bobsView.listMessages({ status: "delivered" })).items.length === 0,
      "bob acknowledged the handshake",
    );
    const { id } = await alice.notify("bob-assistant", { pay: "invoice 42" });
    await eventually(() => firstRuns === 1, "bob's handler started");
    // The gateway goes away while the handler runs, so the ack that follows it cannot reach it.
    await t.gw.close();
    await eventually(() => !bobFirst.connected, "bob saw the gateway go");
    release.resolve();
    await bobFirst.close();
    const log = await readFile(`${t.dir}/state/bob-assistant/handled.log`, "utf8");
    // Per sender: another agent's message with this id would be another message.
    expect(log).toContain(JSON.stringify(`alice-assistant/${id}`));

    t.gw = await t.makeGateway({ dataDir, port, delivery });
    t.cleanups.push(() => t.gw.close());
    expect((await t.statusOf(t.alpha, id)).status).toBe("delivered"); // never acknowledged
    const bob = agentFor(t.gw, t.beta, t.dir); // a new process, as far as the SDK can tell
    let secondRuns = 0;
    bob.onNotification(() => {
      secondRuns++;
    });
    await bob.connect();
    t.cleanups.push(() => bob.close());
    // Only the restarted agent can acknowledge it now: it did, from its ledger on disk.
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
    expect((await t.statusOf(t.alpha, id)).retry_count).toBeGreaterThanOrEqual(1);
    expect([firstRuns, secondRuns]).toEqual([1, 0]);
    // Alice reconnects on her own; her backoff may end after bob's ack, so wait for either outcome.
    await eventually(() => alice.connected || aliceGaveUp.length > 0, "alice reconnected or gave up");
    expect(aliceGaveUp).toEqual([]);
    expect(alice.connected).toBe(true);
  });
}
