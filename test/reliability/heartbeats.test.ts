/**
 * Heartbeats, both ways, with a 200 ms period: the gateway closes a socket that stopped answering
 * its pings for three periods (and keeps one that answers), and the SDK replaces a socket whose
 * gateway went silent for three periods (lying-gateway.ts's `silence`: the socket stays open and
 * hears nothing), so its deliveries flow again on a new one.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { AcpAgent } from "../../src/client/index.js";
import { agentFor, eventually } from "../client/fixtures.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { startLyingGateway } from "../security/lying-gateway.js";

const HEARTBEAT_MS = 200;

describe("heartbeats", () => {
  const tmp = useTmpDir("acp-heartbeats-");
  let gw: TestGateway;
  let alice: TestAgent;
  let bob: TestAgent;
  const cleanups: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    gw = await startTestGateway({ heartbeatMs: HEARTBEAT_MS });
    alice = await gw.register("alice-assistant", "alice");
    bob = await gw.register("bob-assistant", "bob");
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    await gw.close();
  });

  /** A raw socket as `who`; `answersPings: false` is a peer that hangs without closing. */
  async function socket(who: TestAgent, answersPings: boolean) {
    const ws = new WebSocket(gw.gateway.wsUrl, {
      headers: { "x-api-key": who.apiKey },
      autoPong: answersPings,
    });
    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    await new Promise((resolve) => ws.once("message", resolve)); // ready
    cleanups.push(async () => ws.terminate());
    return { ws, closed };
  }

  it("the gateway closes a socket that stopped answering its pings, and keeps one that answers", async () => {
    const answering = await socket(alice, true);
    const hanging = await socket(bob, false);
    await hanging.closed;
    expect(answering.ws.readyState).toBe(WebSocket.OPEN);
  });

  it("the SDK replaces a socket whose gateway went silent for three periods", async () => {
    const lying = await startLyingGateway(gw.url);
    cleanups.push(() => lying.close());
    const agent: AcpAgent = agentFor({ url: lying.url }, bob, tmp());
    const connections: boolean[] = [];
    const disconnects: number[] = [];
    agent.on("connected", (info) => connections.push(info.reconnected));
    agent.on("disconnected", (info) => disconnects.push(info.code));
    const handled: unknown[] = [];
    agent.onNotification((body) => {
      handled.push(body);
    });
    await agent.connect();
    cleanups.push(() => agent.close());
    const sender = agentFor(gw, alice, tmp());
    await sender.connect();
    cleanups.push(() => sender.close());

    lying.silence();
    await eventually(() => connections.includes(true), "the agent opened a new socket");
    expect(disconnects.length).toBeGreaterThan(0);
    // The new socket works: a notification sent now is handled.
    await sender.notify("bob-assistant", { after: "silence" });
    await eventually(() => handled.length === 1, "the notification arrived on the new socket");
  });
});
