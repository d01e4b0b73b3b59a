/**
 * `/mcp` against DNS rebinding and foreign web pages, as the MCP specification asks of Streamable
 * HTTP servers: a request whose Origin the gateway does not allow is refused with 403, and on a
 * gateway bound to loopback so is one whose Host is not the gateway's own (what the official
 * conformance scenario `dns-rebinding-protection` sends: `Host: evil.example.com`, no credentials).
 * A request without Origin (any non-browser MCP client) passes; the gateway's own origins and those
 * the operator allows pass. Both the Streamable HTTP endpoint and the legacy SSE pair.
 */
import { afterEach, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type RawResponse, rawRequest } from "./helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function gateway(allowedOrigins?: string[]): Promise<TestGateway> {
  const gw = await startTestGateway(allowedOrigins ? { allowedOrigins } : {});
  cleanups.push(() => gw.close());
  return gw;
}

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
});

function initialize(gw: TestGateway, headers: Record<string, string>): Promise<RawResponse> {
  return rawRequest(`${gw.url}/mcp`, {
    body: INITIALIZE,
    headers: { accept: "application/json, text/event-stream", ...headers },
  });
}

function refusal(response: RawResponse) {
  return JSON.parse(response.text) as {
    error: { code: number; message: string; data: { problems: unknown[] } };
  };
}

describe("/mcp: Host and Origin", () => {
  it("refuses a foreign Host on a loopback gateway with 403 before credentials (the conformance scenario)", async () => {
    const gw = await gateway();
    const host = new URL(gw.url).host;

    const rebound = await initialize(gw, { host: "evil.example.com" });
    expect(rebound.status).toBe(403);
    expect(refusal(rebound).error).toMatchObject({
      code: -32011,
      data: { problems: [{ path: "/headers/host", message: "not one of the gateway's host names" }] },
    });
    // The gateway's own Host is let through to authentication (401 without a key, not 403).
    expect((await initialize(gw, { host })).status).toBe(401);
    for (const own of [`localhost:${new URL(gw.url).port}`, `[::1]:${new URL(gw.url).port}`])
      expect((await initialize(gw, { host: own })).status, own).toBe(401);
  });

  it("refuses a foreign Origin with 403 even with a valid key; opens no session; the gateway carries on", async () => {
    const gw = await gateway();
    const { apiKey } = await gw.register("alice");
    const evil = await initialize(gw, { "x-api-key": apiKey, origin: "http://evil.example.com" });
    expect(evil.status).toBe(403);
    expect(refusal(evil).error).toMatchObject({
      code: -32011,
      data: { problems: [{ path: "/headers/origin", message: "not an allowed origin" }] },
    });
    expect(evil.headers["mcp-session-id"]).toBeUndefined();
    for (const origin of [
      "null",
      `http://127.0.0.1:${Number(new URL(gw.url).port) + 1}`,
      "https://127.0.0.1",
    ]) {
      expect((await initialize(gw, { "x-api-key": apiKey, origin })).status, origin).toBe(403);
    }
    // The legacy SSE pair too.
    const sse = await rawRequest(`${gw.url}/mcp/sse`, {
      headers: { "x-api-key": apiKey, origin: "http://evil.example.com" },
    });
    expect(sse.status).toBe(403);
    const post = await rawRequest(`${gw.url}/mcp/messages/any`, {
      body: "{}",
      headers: { "x-api-key": apiKey, origin: "http://evil.example.com" },
    });
    expect(post.status).toBe(403);

    // No Origin (a non-browser client) and the gateway's own origins pass.
    for (const origin of [undefined, new URL(gw.url).origin, `http://localhost:${new URL(gw.url).port}`]) {
      const opened = await initialize(gw, { "x-api-key": apiKey, ...(origin && { origin }) });
      expect(opened.status, origin ?? "no Origin").toBe(200);
      expect(opened.headers["mcp-session-id"]).toBeTruthy();
    }
    expect((await rawRequest(`${gw.url}/healthz`)).status).toBe(200);
  });

  it("lets the origins the operator allows through, and only those", async () => {
    const gw = await gateway(["https://app.example.com"]);
    const { apiKey } = await gw.register("alice");
    expect((await initialize(gw, { "x-api-key": apiKey, origin: "https://app.example.com" })).status).toBe(
      200,
    );
    expect(
      (await initialize(gw, { "x-api-key": apiKey, origin: "https://app.example.com:8443" })).status,
    ).toBe(403);
    expect((await initialize(gw, { "x-api-key": apiKey, origin: "http://app.example.com" })).status).toBe(
      403,
    );
  });
});
