import { afterEach, expect, it } from "vitest";
import { buildAnnounce, buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { api, FrameClient, type TestGateway } from "../helpers/gateway.js";
import type { GatewayFactory } from "./suite.js";
import { errorOf, handshake, receive, submit } from "../helpers/messaging.js";

/** Limits, versions, redelivery and dead letters: each needs a gateway configured for it. */
export function gatewayLimitsSuite(makeGateway: GatewayFactory): void {
  const gateways: TestGateway[] = [];
  const open = async (options: Record<string, unknown>) => {
    const gw = await makeGateway(options);
    gateways.push(gw);
    return gw;
  };
  afterEach(async () => {
    for (const gw of gateways.splice(0)) await gw.close();
  });

  it("refuses an oversized envelope with 413 and a rate-limit overrun with 429 and Retry-After", async () => {
    const gw = await open({ limits: { maxEnvelopeBytes: 4096, ratePerSecond: 5, burst: 5 } });
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    const big = await submit(
      gw,
      alpha,
      buildNotification(alpha.sender, "agent-beta", { pad: "x".repeat(5000) }),
    );
    expect([big.status, errorOf(big.json).code]).toEqual([413, ErrorCode.PayloadTooLarge]);
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof submit>> | undefined;
    for (let i = 0; i < 10; i++) {
      const r = await submit(
        gw,
        alpha,
        buildAnnounce(alpha.sender, "agent-beta", { capabilities: [], purpose: "p" }),
      );
      statuses.push(r.status);
      if (r.status === 429) limited = r;
    }
    expect(statuses).toContain(429);
    expect(errorOf(limited!.json).code).toBe(ErrorCode.RateLimited);
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Another agent's budget is its own.
    const other = await submit(
      gw,
      beta,
      buildAnnounce(beta.sender, "agent-alpha", { capabilities: [], purpose: "p" }),
    );
    expect(other.status).toBe(202);
  });

  it("negotiates the highest common protocol version and refuses a pair with none or a downgrade", async () => {
    const current = (version: string) => ({ version, status: "current" });
    const gw = await open({ protocolVersions: ["1.0.0", "1.1.0", "2.0.0"].map(current) });
    const a = await gw.register("agent-a", "pa", { protocolVersions: ["1.0.0", "1.1.0"] });
    const b = await gw.register("agent-b", "pb", { protocolVersions: ["1.1.0", "1.0.0"] });
    const c = await gw.register("agent-c", "pc", { protocolVersions: ["2.0.0"] });
    const downgrade = await submit(
      gw,
      a,
      buildAnnounce(a.sender, "agent-b", { capabilities: [], purpose: "p" }),
    );
    expect([downgrade.status, errorOf(downgrade.json).code]).toEqual([400, ErrorCode.NoCommonVersion]);
    expect(errorOf(downgrade.json).data.negotiated).toBe("1.1.0");
    const agreed = await submit(
      gw,
      a,
      buildAnnounce({ ...a.sender, trustLayerVersion: "1.1.0" }, "agent-b", {
        capabilities: [],
        purpose: "p",
      }),
    );
    expect(agreed.status).toBe(202);
    const none = await submit(gw, a, buildAnnounce(a.sender, "agent-c", { capabilities: [], purpose: "p" }));
    expect([none.status, errorOf(none.json).code]).toEqual([400, ErrorCode.NoCommonVersion]);
    void b;
    void c;
  });

  it("redelivers an unacknowledged message with backoff, then dead-letters it as failed for the sender", async () => {
    const gw = await open({ delivery: { ackWaitMs: 200, maxDeliver: 3, backoffFactor: 1.5 } });
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    await handshake(gw, alpha, beta);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await receive(ws, 2);
    const sent = await submit(gw, alpha, buildNotification(alpha.sender, "agent-beta", { ignore: "me" }));
    const attempts: number[] = [];
    for (let i = 0; i < 3; i++)
      attempts.push((await ws.next("new_message", (f) => f.id === sent.json.id)).attempt);
    expect(attempts).toEqual([1, 2, 3]);
    await expect
      .poll(
        async () =>
          (await api(gw.url, `/api/v1/messages/${sent.json.id}/status`, { apiKey: alpha.apiKey })).json,
        { timeout: 10_000 },
      )
      .toMatchObject({ status: "failed", retry_count: 2, dead_letter: { reason: "max-deliveries" } });
    await ws.close();
  });

  it("lets the recipient reject a message with a reason the sender sees", async () => {
    const gw = await open({});
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    await handshake(gw, alpha, beta);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await receive(ws, 2);
    const sent = await submit(gw, alpha, buildNotification(alpha.sender, "agent-beta", {}));
    const frame = await ws.next("new_message", (f) => f.id === sent.json.id);
    ws.send({ type: "reject", id: frame.id, from: frame.from, reason: "not my job" });
    await expect
      .poll(
        async () => (await api(gw.url, `/api/v1/messages/${frame.id}/status`, { apiKey: alpha.apiKey })).json,
      )
      .toMatchObject({ status: "failed", dead_letter: { reason: "rejected" } });
    await ws.close();
  });

  it("rotates and revokes API keys", async () => {
    const gw = await open({});
    const alpha = await gw.register("agent-alpha");
    const rotated = await api(gw.url, "/api/v1/agents/agent-alpha/rotate", {
      apiKey: alpha.apiKey,
      method: "POST",
    });
    expect(rotated.status).toBe(200);
    expect((await api(gw.url, "/api/v1/agents", { apiKey: alpha.apiKey })).status).toBe(401);
    const fresh = rotated.json.apiKey as string;
    expect((await api(gw.url, "/api/v1/agents", { apiKey: fresh })).status).toBe(200);
    const revokeAsAgent = await api(gw.url, "/api/v1/agents/agent-alpha/revoke", {
      apiKey: fresh,
      method: "POST",
    });
    expect(revokeAsAgent.status).toBe(403);
    const revoked = await api(gw.url, "/api/v1/agents/agent-alpha/revoke", {
      method: "POST",
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    expect(revoked.status).toBe(200);
    expect((await api(gw.url, "/api/v1/agents", { apiKey: fresh })).status).toBe(401);
  });

  it("closes a WebSocket opened before its agent was revoked; a submit sent on it is not taken", async () => {
    const gw = await open({});
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    await handshake(gw, alpha, beta);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    const envelope = (n: number) =>
      signMessage(buildNotification(alpha.sender, "agent-beta", { n }), alpha.signer);
    ws.send({ type: "submit", ref: "before", envelope: envelope(1) });
    expect(await ws.next("submitted", (f) => f.ref === "before")).toMatchObject({ duplicate: false });
    const revoked = await api(gw.url, "/api/v1/agents/agent-alpha/revoke", {
      method: "POST",
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    expect(revoked.status).toBe(200);
    const late = envelope(2);
    ws.send({ type: "submit", ref: "after", envelope: late });
    await expect(ws.next("submitted", (f) => f.ref === "after")).rejects.toThrow(
      /socket closed \(4401 the agent was revoked\)/,
    );
    expect(
      await gw.gateway.broker.get({ from: "agent-alpha", id: late.params.headers["message-id"] as string }),
    ).toBeNull();
  });

  it("serves health and Prometheus metrics", async () => {
    const gw = await open({});
    const health = await api(gw.url, "/healthz");
    expect(health.json).toMatchObject({ status: "ok" });
    const res = await fetch(`${gw.url}/metrics`);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toMatch(/# TYPE acp_ws_connections gauge\nacp_ws_connections 0/);
    const unknown = await api(gw.url, "/api/v1/nothing");
    expect([unknown.status, errorOf(unknown.json).code]).toEqual([404, ErrorCode.NotFound]);
  });
}
