import { afterEach, describe, expect, it } from "vitest";
import { buildAnnounce, buildCapabilities, buildRequest, signMessage } from "../../src/protocol/index.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";

describe("gateway smoke", () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
  });

  it("relays a handshake and a request over WebSocket", async () => {
    gw = await startTestGateway();
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    const send = (from: TestAgent, message: object) => api(gw!.url, "/api/v1/messages", { apiKey: from.apiKey, body: signMessage(message, from.signer) });
    const caps = { tools: [], domains: ["calendar"], limits: [], requests: [] };
    const early = await send(alpha, buildRequest(alpha.sender, "agent-beta", { action: "x" }));
    expect(early.status).toBe(409);
    expect((early.json.error as { code: number }).code).toBe(-32004);
    for (const [a, b] of [[alpha, beta], [beta, alpha]] as const) {
      const r = await send(a, buildAnnounce(a.sender, b.sender.agentId, { capabilities: ["x"], purpose: "test" }));
      expect(r.status, JSON.stringify(r.json)).toBe(202);
    }
    for (const [a, b] of [[alpha, beta], [beta, alpha]] as const) {
      expect((await send(a, buildCapabilities(a.sender, b.sender.agentId, caps))).status).toBe(202);
    }
    const req = buildRequest(alpha.sender, "agent-beta", { action: "get-availability" });
    const submitted = await send(alpha, req);
    expect(submitted.status).toBe(202);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await ws.next("ready");
    const first = await ws.next("new_message", (f) => f.method === "agent.announce");
    expect(first.from).toBe("agent-alpha");
    const delivered = await ws.next("new_message", (f) => f.method === "agent.request");
    expect(delivered.id).toBe(req.params.headers["message-id"]);
    ws.send({ type: "acknowledge", id: delivered.id });
    await new Promise((r) => setTimeout(r, 200));
    const status = await api(gw.url, `/api/v1/messages/${delivered.id}/status`, { apiKey: alpha.apiKey });
    expect(status.json.status).toBe("acknowledged");
    await ws.close();
  });
});
