/**
 * On NATS, a gateway that cannot reach JetStream answers 503 -32018 — and when a publish reached
 * JetStream but its acknowledgement did not come back, the message is stored although the answer
 * is 503. The SDK resends the identical envelope: stored ones come back `duplicate: true`, the
 * others are stored now. `kill -9` of nats-server (file store) with submissions under way, then a
 * restart on the same port and store: every message the app sent is handed over exactly once.
 */
import { afterEach, expect, it } from "vitest";
import type { AcpAgent, ResubmitInfo } from "../../src/client/index.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { recordFigures } from "../reliability/support/figures.js";
import { agentFor, duplicateSubmissions, duplicatesIn, eventually } from "./fixtures.js";

const startNats = useNatsServer();
const MESSAGES = 3_000;

describeWithNats("AcpAgent resubmits while nats-server is down", () => {
  const tmp = useTmpDir("acp-client-resubmit-nats-");
  let gateway: TestGateway | undefined;
  const agents: AcpAgent[] = [];
  afterEach(async () => {
    for (const agent of agents.splice(0).reverse()) await agent.close().catch(() => undefined);
    await gateway?.close();
    gateway = undefined;
  });

  it("kill -9 of nats-server mid-stream: each submission resolves, each is handled once", async () => {
    const nats = await startNats();
    gateway = await startTestGateway({ natsUrl: nats.url, limits: { ratePerSecond: 0 } });
    const gw = gateway;
    const dir = tmp();
    const connect = async (agentId: string, principal: string) => {
      const agent = agentFor(gw, await gw.register(agentId, principal), dir, { requestTimeoutMs: 60_000 });
      agents.push(agent);
      const errors: Error[] = []; // expected while NATS is down (acks that cannot be recorded)
      agent.on("error", (err) => errors.push(err));
      await agent.connect();
      return agent;
    };
    const alice = await connect("alice-assistant", "alice");
    const bob = await connect("bob-assistant", "bob");
    const handled = new Map<string, number>();
    bob.onNotification((_body, ctx) => {
      handled.set(ctx.messageId, (handled.get(ctx.messageId) ?? 0) + 1);
    });
    const resubmits: ResubmitInfo[] = [];
    alice.on("resubmit", (info) => resubmits.push(info));
    await alice.handshake("bob-assistant");

    // A steady stream, 20 in flight, so that the kill lands among submissions under way.
    const ids: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < MESSAGES) {
        const n = next++;
        ids[n] = (await alice.notify("bob-assistant", { n })).id;
      }
    };
    const streaming = Promise.all(Array.from({ length: 20 }, worker));
    await eventually(() => ids.filter(Boolean).length >= 500, "the first submissions were accepted");
    await nats.stop("SIGKILL");
    await eventually(
      () => resubmits.some((r) => r.cause === "StorageUnavailable"),
      "the gateway answered 503 while JetStream was gone",
      30_000,
    );
    await nats.restart();
    await streaming;

    await eventually(() => ids.every((id) => handled.has(id)), "every notification handled", 60_000);
    recordFigures("sdk-nats-server-killed", {
      asked: MESSAGES,
      resolved: ids.filter(Boolean).length,
      handled: handled.size,
      duplicated: duplicatesIn(handled),
      resentAfter503: resubmits.filter((r) => r.cause === "StorageUnavailable").length,
      resentAfterConnectionLost: resubmits.filter((r) => r.cause === "connection-lost").length,
      answeredDuplicate: await duplicateSubmissions(gw.url),
    });
    expect(new Set(ids).size).toBe(MESSAGES);
    expect(duplicatesIn(handled)).toBe(0);
    expect(handled.size).toBe(MESSAGES);
  }, 120_000);
});
