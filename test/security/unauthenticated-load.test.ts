/**
 * Nobody fills the gateway's memory without a credential. Two attacks a stranger can make:
 * - many requests with random principal tokens: each "no such token" was remembered for ever
 *   (300,000 of them grew the heap by 37 MB). The cache is bounded: it stays at its bound;
 * - many WebSocket connections that never authenticate (each may wait 10 s for a first-frame
 *   `auth` and send up to the frame limit meanwhile): capped in number gateway-wide (503 past the
 *   cap) and in what each may send before it authenticates.
 * Agents with real credentials keep working throughout.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { CACHED_PRINCIPAL_TOKENS } from "../../src/gateway/principals.js";
import { MAX_UNAUTHENTICATED_BYTES } from "../../src/gateway/unauthenticated.js";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import { principalToken } from "../helpers/dashboard.js";
import { api, FrameClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { handshake } from "../helpers/messaging.js";
import { scrapeMetrics } from "../helpers/metrics.js";

/** Runs `count` calls of `task`, `concurrency` at a time. */
async function inParallel(count: number, concurrency: number, task: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/** Opens a WebSocket to the gateway without credentials; resolves when open, or with the refusal's status. */
function openBare(wsUrl: string): Promise<{ ws: WebSocket } | { status: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl);
    ws.once("open", () => resolve({ ws }));
    ws.once("unexpected-response", (_req, res) => resolve({ status: res.statusCode ?? 0 }));
    ws.once("error", reject);
  });
}

describe("a stranger without credentials", () => {
  const gateways: TestGateway[] = [];
  const sockets: WebSocket[] = [];
  afterEach(async () => {
    for (const ws of sockets.splice(0)) ws.terminate();
    for (const gw of gateways.splice(0)) await gw.close();
  });

  it("random principal tokens: every one refused, the token cache stays at its bound, real tokens still work", async () => {
    // Failed checks are throttled per source address; an attacker with many addresses is not, so
    // the throttle is opened wide here to let every token reach the cache.
    const gw = await startTestGateway({
      limits: { failedCredentials: { burst: 1_000_000, perMinute: 1_000_000 } },
    });
    gateways.push(gw);
    const alice = await principalToken(gw, "alice");
    const flood = CACHED_PRINCIPAL_TOKENS + 2_000;
    const answers = new Map<number, number>();
    await inParallel(flood, 32, async () => {
      const res = await fetch(`${gw.url}/api/v1/dashboard/me`, {
        headers: { authorization: `Bearer acppr_${randomBytes(32).toString("base64url")}` },
      });
      await res.arrayBuffer();
      answers.set(res.status, (answers.get(res.status) ?? 0) + 1);
    });
    expect(answers).toEqual(new Map([[401, flood]]));
    expect(gw.gateway.context.principals.cachedTokens).toBeLessThanOrEqual(CACHED_PRINCIPAL_TOKENS);
    expect(
      (await scrapeMetrics(gw.url)).get('acp_auth_cache_entries{cache="principal-tokens"}'),
    ).toBeLessThanOrEqual(CACHED_PRINCIPAL_TOKENS);
    // The real principal signs in as before.
    const me = await api(gw.url, "/api/v1/dashboard/me", { headers: { authorization: `Bearer ${alice}` } });
    expect([me.status, me.json.viewer]).toEqual([
      200,
      { kind: "principal", principal_id: "alice", principalId: "alice" },
    ]);
  }, 120_000);

  it("connections that never authenticate: capped gateway-wide (503), each limited in what it sends; agents still connect", async () => {
    const cap = 20;
    const gw = await startTestGateway({ limits: { maxUnauthenticatedSockets: cap } });
    gateways.push(gw);
    const wsUrl = gw.gateway.wsUrl;
    const alpha = await gw.register("alpha");
    const beta = await gw.register("beta");
    await handshake(gw, alpha, beta);
    const before = signMessage(buildNotification(alpha.sender, "beta", { n: 1 }), alpha.signer);
    expect((await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: before })).status).toBe(202);

    // The stranger fills the cap with sockets that say nothing.
    for (let i = 0; i < cap; i++) {
      const opened = await openBare(wsUrl);
      if (!("ws" in opened)) throw new Error(`connection ${i} refused with ${opened.status}`);
      sockets.push(opened.ws);
    }
    expect((await scrapeMetrics(gw.url)).get("acp_ws_unauthenticated")).toBe(cap);
    const refused = await openBare(wsUrl);
    expect(refused).toEqual({ status: 503 });
    expect(
      (await scrapeMetrics(gw.url)).get('acp_ws_upgrades_refused_total{reason="unauthenticated-cap"}'),
    ).toBe(1);

    // An agent with its key in a header is not held up: it connects and gets what was queued.
    const receiver = await FrameClient.connect(wsUrl, beta.apiKey);
    const id = before.params.headers["message-id"];
    expect((await receiver.next("new_message", (frame) => frame.id === id)).method).toBe(
      "agent.notification",
    );
    await receiver.close();

    // One stranger socket sends more than an auth frame before authenticating: it is cut off.
    const talker = sockets[0] as WebSocket;
    const closed = new Promise<void>((resolve) => talker.once("close", () => resolve()));
    talker.send("x".repeat(MAX_UNAUTHENTICATED_BYTES + 1024));
    await closed;

    // The others go; a browser-style connection (first-frame auth) gets in again.
    for (const ws of sockets.splice(0)) ws.terminate();
    const deadline = Date.now() + 10_000;
    while ((await scrapeMetrics(gw.url)).get("acp_ws_unauthenticated") !== 0) {
      if (Date.now() > deadline) throw new Error("unauthenticated sockets were never released");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const browser = await openBare(wsUrl);
    if (!("ws" in browser)) throw new Error(`refused with ${browser.status}`);
    sockets.push(browser.ws);
    const answer = new Promise<string>((resolve) =>
      browser.ws.once("message", (data) => resolve(String(data))),
    );
    browser.ws.send(JSON.stringify({ type: "auth", apiKey: alpha.apiKey }));
    expect(JSON.parse(await answer)).toMatchObject({ type: "ready", agentId: "alpha" });
  }, 60_000);
});
