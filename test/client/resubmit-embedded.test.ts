/**
 * The SDK resends what the gateway may not have stored, against a gateway in its own process on
 * the embedded broker: `kill -9` of it with thousands of submissions in flight, and a full disk
 * (RLIMIT_FSIZE of 1 byte through `prlimit --pid`: every write fails, as on a full disk; see
 * test/reliability/storage.test.ts) that answers 503 -32018 until it is lifted. What counts is
 * the application: every message the sender's app asked for is handed to the recipient's app
 * exactly once, and every promise the sender's app holds resolves (or, past its limits, rejects
 * saying what happened).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AcpAgent, AcpAgentOptions, ResubmitInfo } from "../../src/client/index.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { ADMIN_TOKEN, registerTestAgent, type TestAgent } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { recordFigures } from "../reliability/support/figures.js";
import {
  type GatewayChild,
  type LaunchOptions,
  setLimit,
  spawnGateway,
} from "../reliability/support/processes.js";
import { agentFor, deferred, duplicateSubmissions, duplicatesIn, eventually } from "./fixtures.js";

/** Short ack wait: what a killed gateway had handed out comes back soon after its restart. */
const LAUNCH: LaunchOptions = {
  adminToken: ADMIN_TOKEN,
  limits: { ratePerSecond: 1_000_000, burst: 1_000_000 },
  delivery: { ackWaitMs: 1_000, maxDeliver: 5, backoffFactor: 1 },
};

describe("AcpAgent resubmits through gateway faults (embedded broker, gateway in its own process)", () => {
  const tmp = useTmpDir("acp-client-resubmit-");
  const gateways: GatewayChild[] = [];
  const agents: AcpAgent[] = [];
  afterEach(async () => {
    for (const agent of agents.splice(0).reverse()) await agent.close().catch(() => undefined);
    for (const gateway of gateways.splice(0)) await gateway.kill();
  });

  async function start(data: string, port?: number): Promise<GatewayChild> {
    const gateway = await spawnGateway({ launch: { ...LAUNCH, data }, ...(port ? { port } : {}) });
    gateways.push(gateway);
    return gateway;
  }

  /**
   * A gateway, alice, and bob whose app counts what it is handed (by message-id) and answers
   * requests with their body.
   */
  async function pair(options: Partial<AcpAgentOptions> = {}) {
    const data = tmp();
    const dir = tmp();
    const gateway = await start(data);
    const alpha = await registerTestAgent(gateway.url, "alice-assistant", "alice");
    const beta = await registerTestAgent(gateway.url, "bob-assistant", "bob");
    const connect = async (who: TestAgent) => {
      const agent = agentFor(gateway, who, dir, { requestTimeoutMs: 60_000, ...options });
      agents.push(agent);
      await agent.connect();
      return agent;
    };
    const alice = await connect(alpha);
    const bob = await connect(beta);
    // Expected while the disk is full (acks the gateway cannot record): kept, not printed.
    const errors: Error[] = [];
    for (const agent of [alice, bob]) agent.on("error", (err) => errors.push(err));
    const handled = new Map<string, number>();
    const count = (id: string) => handled.set(id, (handled.get(id) ?? 0) + 1);
    bob.onNotification((_body, ctx) => {
      count(ctx.messageId);
    });
    bob.onRequest((body, ctx) => {
      count(ctx.messageId);
      return body;
    });
    const resubmits: ResubmitInfo[] = [];
    alice.on("resubmit", (info) => resubmits.push(info));
    await alice.handshake("bob-assistant");
    return { data, dir, gateway, alpha, beta, alice, bob, handled, resubmits, errors };
  }

  it("kill -9 of the gateway with submissions in flight: each resolves, each is handled once", async () => {
    const { data, gateway, alice, handled, resubmits } = await pair();
    // A steady stream, 20 in flight, one request in 50, so the kill lands among submissions under way.
    const ids: string[] = [];
    const answers: unknown[] = [];
    let next = 0;
    const worker = async () => {
      while (next < 2_000) {
        const n = next++;
        if (n % 50 === 0) answers.push(await alice.request("bob-assistant", { n }));
        else ids.push((await alice.notify("bob-assistant", { n })).id);
      }
    };
    const streaming = Promise.all(Array.from({ length: 20 }, worker));
    await eventually(() => ids.length >= 400, "the first submissions were accepted", 30_000);
    const acceptedAtKill = ids.length + answers.length;
    await gateway.kill();
    const restarted = await start(data, gateway.port);
    await streaming;

    await eventually(() => ids.every((id) => handled.has(id)), "every notification handled", 60_000);
    const resent = resubmits.filter((r) => r.cause === "connection-lost").length;
    recordFigures("sdk-kill-gateway-embedded", {
      asked: 2_000,
      resolved: ids.length + answers.length,
      handled: handled.size,
      duplicated: duplicatesIn(handled),
      acceptedAtKill,
      resentAfterConnectionLost: resent,
      answeredDuplicate: await duplicateSubmissions(restarted.url),
    });
    expect(new Set(ids).size).toBe(1_960);
    expect(answers).toHaveLength(40);
    expect(duplicatesIn(handled)).toBe(0);
    expect(handled.size).toBe(2_000);
    // The fault hit submissions in flight, and those were what the SDK sent again.
    expect(resent).toBeGreaterThan(0);
  }, 120_000);

  it("a full disk answers 503: the SDK resends until it can write, and nothing is handled twice", async () => {
    const retry = { submitRetry: { maxAttempts: Infinity, initialDelayMs: 50, maxDelayMs: 300 } };
    const { gateway, alice, handled, resubmits } = await pair(retry);
    setLimit(gateway.pid, "fsize", "1");
    const notes = Array.from({ length: 20 }, (_, n) => alice.notify("bob-assistant", { n }));
    const requests = Array.from({ length: 3 }, (_, n) => alice.request("bob-assistant", { n }));
    const refusedIds = () =>
      new Set(resubmits.filter((r) => r.cause === "StorageUnavailable").map((r) => r.messageId));
    await eventually(() => refusedIds().size === 23, "each submission was refused at least once");
    expect(handled.size).toBe(0);
    setLimit(gateway.pid, "fsize", "unlimited");

    const ids = (await Promise.all(notes)).map((sent) => sent.id);
    await expect(Promise.all(requests)).resolves.toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
    await eventually(() => ids.every((id) => handled.has(id)), "every notification handled");
    recordFigures("sdk-disk-full", {
      asked: 23,
      resolved: ids.length + 3,
      handled: handled.size,
      duplicated: duplicatesIn(handled),
      refusedAnswers503: resubmits.filter((r) => r.cause === "StorageUnavailable").length,
    });
    expect(duplicatesIn(handled)).toBe(0);
    expect(handled.size).toBe(23);
  }, 60_000);

  it("past maxAttempts or its deadline a refused submission fails, saying so; it is never delivered", async () => {
    const retry = { submitRetry: { maxAttempts: 4, initialDelayMs: 400, maxDelayMs: 400 } };
    const { gateway, alice, handled, resubmits } = await pair(retry);
    setLimit(gateway.pid, "fsize", "1");
    const outOfAttempts = await alice.notify("bob-assistant", { n: 1 }).catch((err: unknown) => err);
    expect(outOfAttempts).toMatchObject({
      code: ErrorCode.StorageUnavailable,
      message: expect.stringContaining("gave up after 4 attempts"),
      data: { attempts: 4, mayHaveBeenAccepted: true, messageId: expect.any(String) },
    });
    const firstId = (outOfAttempts as { data: { messageId: string } }).data.messageId;
    expect(resubmits.filter((r) => r.messageId === firstId).map((r) => r.attempt)).toEqual([2, 3, 4]);

    const outOfTime = (await alice
      .notify("bob-assistant", { n: 2 }, { timeoutMs: 500 })
      .catch((err: unknown) => err)) as { code: number; data: { attempts: number } };
    // The deadline ends it before the 4 attempts: as a refusal whose next backoff would pass the
    // deadline (-32018), or, if a resend is in flight at that moment, as a timeout (-32019).
    // Either way it says the message may have been stored.
    expect([ErrorCode.StorageUnavailable, ErrorCode.Timeout]).toContain(outOfTime.code);
    expect(outOfTime).toMatchObject({ data: { mayHaveBeenAccepted: true } });
    expect(outOfTime.data.attempts).toBeLessThan(4);

    setLimit(gateway.pid, "fsize", "unlimited");
    const { id } = await alice.notify("bob-assistant", { n: 3 });
    // Per-pair order: had either refused one been stored, it would have been handled before this.
    await eventually(() => handled.has(id), "the next notification handled");
    expect([...handled.keys()]).toEqual([id]);
  }, 60_000);

  it("a response that could not be sent before the agent stopped: the restarted agent sends it, without running the handler again", async () => {
    const { data, dir, gateway, alice, bob, beta, errors } = await pair();
    const release = deferred();
    let firstRuns = 0;
    bob.onRequest(async () => {
      firstRuns++;
      await release.promise;
      return { by: "first" };
    });
    const answer = alice.request("bob-assistant", { action: "book" });
    await eventually(() => firstRuns === 1, "bob's handler started");
    await gateway.kill();
    release.resolve();
    await bob.close(); // its response is still waiting for a gateway: given up after the drain
    expect(errors.map((e) => e.message).join("\n")).toContain("closed before the gateway accepted");

    const restarted = await start(data, gateway.port);
    const bobAgain = agentFor(restarted, beta, dir);
    agents.push(bobAgain);
    let secondRuns = 0;
    bobAgain.onRequest(() => {
      secondRuns++;
      return { by: "second" };
    });
    await bobAgain.connect();
    // The first answer never left, but it was recorded with the delivery: the redelivery sends it.
    await expect(answer).resolves.toEqual({ by: "first" });
    expect([firstRuns, secondRuns]).toEqual([1, 0]);
  }, 90_000);
});
