import { beforeAll, describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { type FederatedGateway, useFederatedPair } from "../helpers/federation.js";
import { api } from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { until } from "../helpers/until.js";

/** Two organizations, each behind its own gateway (TLS between them), admitting each other. */
describe("federation: agents of two organizations", () => {
  let a: FederatedGateway;
  let b: FederatedGateway;
  let alpha: AcpAgent;
  let beta: AcpAgent;
  let alphaKey: string;
  const started = useFederatedPair("embedded");

  beforeAll(async () => {
    ({ a, b } = started());
    const alphaAgent = await a.agent("alpha");
    alpha = alphaAgent.agent;
    alphaKey = alphaAgent.registered.apiKey;
    beta = (await b.agent("beta")).agent;
  });

  it("handshakes, exchanges a request and response and an encrypted notification, and hands work over", async () => {
    beta.onRequest("agent.request", (body, context) => ({
      echo: body,
      from: context.from,
      principal: context.principalId,
    }));
    const notes: { body: Record<string, unknown>; encrypted: boolean; from: string }[] = [];
    beta.onNotification((body, context) => {
      notes.push({ body, encrypted: context.encrypted, from: context.from });
    });
    beta.onHandoff((handoff) => ({ accepted: true, remaining: handoff.remaining }));

    const handshake = await alpha.handshake("beta@b.test");
    expect(handshake.state).toBe("established");
    expect(handshake.principalId).toBe("principal-beta@b.test");

    const answer = await alpha.request("beta@b.test", { action: "ping", n: 1 });
    expect(answer).toEqual({
      echo: { action: "ping", n: 1 },
      from: "alpha@a.test",
      principal: "principal-alpha@a.test",
    });

    await alpha.notify("beta@b.test", { secret: "only beta reads this" }, { encrypt: true });
    await until(
      () => notes.length,
      (n) => n === 1,
      "beta got the notification",
    );
    expect(notes[0]).toEqual({
      body: { secret: "only beta reads this" },
      encrypted: true,
      from: "alpha@a.test",
    });

    const handed = await alpha.handoff("beta@b.test", {
      completed: ["collected availability"],
      remaining: "book the slot",
      context: { slot: "2026-02-18T10:00:00Z" },
    });
    expect(handed).toEqual({ accepted: true, remaining: "book the slot" });
  });

  it("shows the sender the remote recipient's progress, and the remote agent by its address", async () => {
    const sent = await alpha.notify("beta@b.test", { status: "sync" });
    const status = await until(
      () => api(a.url, `/api/v1/messages/${sent.id}/status`, { apiKey: alphaKey }),
      (s) => s.json.status === "acknowledged",
      "the notification is acknowledged at b.test",
    );
    expect(status.json).toMatchObject({ to: "beta@b.test", peer: "b.test", status: "acknowledged" });
    expect(typeof status.json.forwarded_at).toBe("string");
    const view = await api(a.url, "/api/v1/agents/beta%40b.test", { apiKey: alphaKey });
    expect(view.json).toMatchObject({ agentId: "beta@b.test", principalId: "principal-beta@b.test" });
    const self = await api(a.url, "/api/v1/agents/alpha", { apiKey: alphaKey });
    expect(self.json.address).toBe("alpha@a.test");
  });

  it("carries each link's figures in /metrics", async () => {
    const sent = await scrapeMetrics(a.url);
    expect(sent.get('acp_federation_forwarded_total{peer="b.test"}')).toBeGreaterThanOrEqual(5);
    expect(sent.get('acp_federation_peer_up{peer="b.test"}')).toBe(1);
    expect(sent.get('acp_federation_queue_depth{peer="b.test"}')).toBe(0);
    expect(sent.get('acp_federation_oldest_queued_seconds{peer="b.test"}')).toBe(0);
    const received = await scrapeMetrics(b.url);
    expect(received.get('acp_federation_received_total{peer="a.test"}')).toBeGreaterThanOrEqual(5);
  });
});
