/**
 * The Phoenix Channels socket (`/socket/websocket`) hands out an agent's inbox, so it is held to the
 * native socket's rules. Replayed: a connection without credentials, with a wrong key, with a
 * custodial agent's key, in another serializer version; an authenticated agent joining another
 * agent's topic and acknowledging another agent's message; a flood of joins; garbage instead of
 * Phoenix messages.
 * Each is refused (no socket, or an error reply naming why), nothing of anyone else's is delivered
 * or settled, and the gateway stays healthy.
 */
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { buildAnnounce, signMessage } from "../../src/protocol/index.js";
import { api, registerCustodial, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { until } from "../helpers/until.js";
import { usePhoenixAgents } from "../gateway/phoenix-client.js";

let gw: TestGateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});
const phoenixAgent = usePhoenixAgents();

/** A raw upgrade to the Phoenix path: the HTTP status and JSON-RPC error of a refusal, or "open". */
function upgrade(gateway: TestGateway, query: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string } | "open">((resolve) => {
    const ws = new WebSocket(`${gateway.url.replace(/^http/, "ws")}/socket/websocket?${query}`, { headers });
    ws.on("open", () => {
      ws.close();
      resolve("open");
    });
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on("error", () => undefined);
  });
}

describe("Phoenix Channels socket: nothing without the agent's own key, nothing of another agent's", () => {
  it("refuses an upgrade without a valid key, a custodial agent's, and another serializer", async () => {
    gw = await startTestGateway();
    const bob = await gw.register("bob");
    const custodial = await registerCustodial(gw.url, "worker");
    const refusals = [
      [await upgrade(gw, "vsn=2.0.0"), 401, -32010],
      [await upgrade(gw, "vsn=2.0.0&api_key=acp_not-a-key"), 401, -32010],
      [await upgrade(gw, "vsn=2.0.0", { "x-api-key": "acp_not-a-key" }), 401, -32010],
      [await upgrade(gw, `vsn=2.0.0&api_key=${custodial.json.apiKey}`), 403, -32011],
      [await upgrade(gw, `vsn=1.0.0&api_key=${bob.apiKey}`), 400, -32602],
    ] as const;
    for (const [outcome, status, code] of refusals) {
      expect(outcome).toMatchObject({ status });
      const body = JSON.parse((outcome as { body: string }).body) as { error: { code: number } };
      expect(body.error.code).toBe(code);
    }
    expect(JSON.parse((refusals[4][0] as { body: string }).body).error.data.problems).toEqual([
      { path: "vsn", message: 'must be 2.0.0, got "1.0.0"' },
    ]);
    // The phoenix client with a wrong key never gets a socket.
    const stranger = phoenixAgent(gw, "messages:bob", { params: { api_key: "acp_not-a-key" } });
    const errors: unknown[] = [];
    stranger.socket.onError((e) => {
      errors.push(e);
    });
    await until(
      () => errors,
      (e) => e.length > 0,
      "the stranger's connection fails",
    );
    expect(stranger.socket.isConnected()).toBe(false);
    expect(await upgrade(gw, `vsn=2.0.0&api_key=${bob.apiKey}`)).toBe("open");
    // Only the socket just opened (and closed) was ever authenticated: once it is gone, none is open.
    const gateway = gw;
    await until(
      () => scrapeMetrics(gateway.url),
      (metrics) => metrics.get("acp_phoenix_connections") === 0,
      "no Phoenix socket is left open",
    );
    expect((await api(gw.url, "/healthz")).json).toMatchObject({ status: "ok" });
  });

  it("lets an agent join only its own topic and settle only its own messages", async () => {
    gw = await startTestGateway();
    const alice = await gw.register("alice");
    const bob = await gw.register("bob");
    // Something waits for alice: bob must not see or settle it.
    const res = await api(gw.url, "/api/v1/messages", {
      apiKey: bob.apiKey,
      body: signMessage(
        buildAnnounce(bob.sender, "alice", { capabilities: [], purpose: "hello" }),
        bob.signer,
      ),
    });
    const forAlice = res.json.id as string;

    const intruder = phoenixAgent(gw, "messages:alice", { params: { api_key: bob.apiKey } });
    expect(await intruder.join()).toEqual({
      status: "error",
      response: { reason: "unauthorized", message: "this socket is bob's: it may join messages:bob only" },
    });
    const own = phoenixAgent(gw, "messages:bob", { params: { api_key: bob.apiKey } });
    expect((await own.join()).status).toBe("ok");
    for (const payload of [
      { id: forAlice },
      { id: forAlice, from: "bob" },
      { id: forAlice, from: "alice" },
    ]) {
      expect((await own.push("acknowledge", payload)).status, JSON.stringify(payload)).toBe("error");
      expect((await own.push("reject", { ...payload, reason: "mine now" })).status).toBe("error");
    }
    expect(intruder.messages).toEqual([]);
    expect(own.messages).toEqual([]);
    const status = await api(gw.url, `/api/v1/messages/${forAlice}/status?from=bob`, {
      apiKey: alice.apiKey,
    });
    expect(status.json).toMatchObject({ status: "queued" });
  });

  it("answers a flood of joins without queueing them: at most a few wait, the rest are refused", async () => {
    gw = await startTestGateway();
    const bob = await gw.register("bob");
    const ws = new WebSocket(
      `${gw.url.replace(/^http/, "ws")}/socket/websocket?vsn=2.0.0&api_key=${bob.apiKey}`,
    );
    await new Promise((resolve) => ws.on("open", resolve));
    const replies: { status: string; response: { reason?: string } }[] = [];
    ws.on("message", (data) => {
      const [, , , event, payload] = JSON.parse(data.toString()) as [unknown, unknown, string, string, never];
      if (event === "phx_reply") replies.push(payload);
    });
    const flood = 200;
    for (let i = 0; i < flood; i++) ws.send(JSON.stringify([`${i}`, `${i}`, "messages:bob", "phx_join", {}]));
    await until(
      () => replies,
      (r) => r.length === flood,
      "every join is answered",
    );
    const refused = replies.filter((r) => r.response.reason === "too many joins in progress");
    expect(refused.length).toBeGreaterThan(flood / 2);
    expect(replies.filter((r) => r.status === "ok").length).toBe(flood - refused.length);
    ws.close();
    // Bob's inbox is his to open again, and the gateway serves.
    const own = phoenixAgent(gw, "messages:bob", { params: { api_key: bob.apiKey } });
    expect((await own.join()).status).toBe("ok");
    expect((await api(gw.url, "/healthz")).json).toMatchObject({ status: "ok" });
  });

  it("closes a socket that sends anything but Phoenix messages, and keeps serving", async () => {
    gw = await startTestGateway();
    const bob = await gw.register("bob");
    for (const garbage of [
      '{"topic":"messages:bob"}',
      "[1,2,3]",
      "not json",
      '[null,"1","messages:bob","phx_join",[]]',
    ]) {
      const ws = new WebSocket(
        `${gw.url.replace(/^http/, "ws")}/socket/websocket?vsn=2.0.0&api_key=${bob.apiKey}`,
      );
      await new Promise((resolve) => ws.on("open", resolve));
      const closed = new Promise<number>((resolve) => ws.on("close", resolve));
      ws.send(garbage);
      expect(await closed, garbage).toBe(1007);
    }
    const own = phoenixAgent(gw, "messages:bob", { params: { api_key: bob.apiKey } });
    expect((await own.join()).status).toBe("ok");
    expect((await api(gw.url, "/healthz")).json).toMatchObject({ status: "ok" });
  });
});
