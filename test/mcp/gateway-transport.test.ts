import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../helpers/gateway.js";
import { readSseUntil, until, useMcpGateway } from "../helpers/mcp-gateway.js";

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify(body),
  });

describe("the gateway's MCP endpoint: transports, authentication, sessions", () => {
  const bed = useMcpGateway({ idleTimeoutMs: 1_200, keepAliveMs: 50, pageSize: 2 });

  it.each(["streamable", "sse"] as const)(
    "%s: declares agents at the top level (and under experimental), and lists every registered agent",
    async (kind) => {
      const alice = await bed.register("alice", ["translate"]);
      await bed.register("bob");
      await bed.register("carol");
      const client = await bed.client(kind, alice.apiKey);
      expect(client.agentsCapability).toBe("top-level");
      expect(client.serverCapabilities).toMatchObject({
        experimental: { agents: {} },
        resources: { subscribe: true },
        tools: {},
        prompts: {},
      });
      const firstPage = await client.listAgentsPage();
      expect(firstPage.agents.map((a) => a.name)).toEqual(["alice", "bob"]);
      expect(firstPage.nextCursor).toBeTypeOf("string");
      const all = await client.listAgents();
      expect(all.map((a) => a.name)).toEqual(["alice", "bob", "carol"]);
      expect(all[0]).toMatchObject({
        description:
          "ACP agent acting for principal-alice; capabilities: translate (input: an agent.request body)",
        inputSchema: { type: "object" },
      });
      const stock = await bed.sdkClient(kind, alice.apiKey);
      expect(stock.getServerCapabilities()?.experimental).toEqual({ agents: {} });
    },
  );

  it("refuses requests without a valid agent key with 401 and a JSON-RPC error; the admin token gets 403", async () => {
    const refused: Record<string, string>[] = [
      {},
      { "x-api-key": "acp_wrong" },
      { authorization: "Bearer acp_wrong" },
    ];
    for (const headers of refused) {
      const res = await post(`${bed.gw.url}/mcp`, INITIALIZE, headers);
      expect(res.status).toBe(401);
      // The challenge names the RFC 9728 metadata, which lists no authorization server (gateway-no-oauth.test.ts).
      expect(res.headers.get("www-authenticate")).toBe(
        `Bearer realm="acp", resource_metadata="${bed.gw.url}/.well-known/oauth-protected-resource/mcp"`,
      );
      const body = (await res.json()) as { jsonrpc: string; error: { code: number; message: string } };
      expect(body.jsonrpc).toBe("2.0");
      expect(body.error.message).toMatch(/API key/);
    }
    const sse = await fetch(`${bed.gw.url}/mcp/sse`);
    expect(sse.status).toBe(401);
    const admin = await post(`${bed.gw.url}/mcp`, INITIALIZE, { authorization: `Bearer ${ADMIN_TOKEN}` });
    expect(admin.status).toBe(403);
    expect(((await admin.json()) as { error: { message: string } }).error.message).toMatch(/agent's API key/);
    expect(bed.mcp.stats().sessions).toBe(0);
  });

  it("accepts the key as X-API-Key, Api-Key or Authorization: Bearer", async () => {
    const alice = await bed.register("alice");
    const accepted: Record<string, string>[] = [
      { "x-api-key": alice.apiKey },
      { "api-key": alice.apiKey },
      { authorization: `Bearer ${alice.apiKey}` },
    ];
    for (const headers of accepted) {
      const res = await post(`${bed.gw.url}/mcp`, INITIALIZE, headers);
      expect(res.status).toBe(200);
      expect(res.headers.get("mcp-session-id")).toMatch(/^[0-9a-f-]{36}$/);
      await res.text();
    }
    expect(bed.mcp.stats().sessions).toBe(3);
  });

  it("binds a session to the agent that opened it: another agent's key gets 403, an unknown session 404", async () => {
    const alice = await bed.register("alice");
    const mallory = await bed.register("mallory");
    const opened = await post(`${bed.gw.url}/mcp`, INITIALIZE, { "x-api-key": alice.apiKey });
    const sessionId = opened.headers.get("mcp-session-id") ?? "";
    await opened.text();
    const list = { jsonrpc: "2.0", id: 2, method: "agents/list", params: {} };
    const stolen = await post(`${bed.gw.url}/mcp`, list, {
      "x-api-key": mallory.apiKey,
      "mcp-session-id": sessionId,
    });
    expect(stolen.status).toBe(403);
    expect(((await stolen.json()) as { error: { message: string } }).error.message).toBe(
      `MCP session ${sessionId} belongs to another agent`,
    );
    // The session id is no credential: each request in the session is authenticated again.
    const keyless = await post(`${bed.gw.url}/mcp`, list, { "mcp-session-id": sessionId });
    expect(keyless.status).toBe(401);
    const wrongKey = await post(`${bed.gw.url}/mcp`, list, {
      "x-api-key": `${alice.apiKey}x`,
      "mcp-session-id": sessionId,
    });
    expect(wrongKey.status).toBe(401);
    const own = await post(`${bed.gw.url}/mcp`, list, {
      "x-api-key": alice.apiKey,
      "mcp-session-id": sessionId,
    });
    expect(own.status).toBe(200);
    await own.text();
    const unknown = await post(`${bed.gw.url}/mcp`, list, {
      "x-api-key": alice.apiKey,
      "mcp-session-id": "00000000-0000-4000-8000-000000000000",
    });
    expect(unknown.status).toBe(404);

    // The legacy pair: the endpoint event names the POST URL; only the opener may post to it.
    const stream = await fetch(`${bed.gw.url}/mcp/sse`, { headers: { "x-api-key": alice.apiKey } });
    const first = await readSseUntil(stream, (text) => text.includes("\n\n"));
    const endpoint = /^event: endpoint\ndata: (\/mcp\/messages\/[0-9a-f-]{36})\n\n/.exec(first)?.[1];
    expect(endpoint).toBeDefined();
    const foreign = await post(`${bed.gw.url}${endpoint}`, INITIALIZE, { "x-api-key": mallory.apiKey });
    expect(foreign.status).toBe(403);
    const anonymous = await post(`${bed.gw.url}${endpoint}`, INITIALIZE);
    expect(anonymous.status).toBe(401);
  });

  it("writes keep-alive comments on idle SSE streams, legacy and Streamable HTTP alike", async () => {
    const alice = await bed.register("alice");
    const legacy = await fetch(`${bed.gw.url}/mcp/sse`, { headers: { "x-api-key": alice.apiKey } });
    expect(legacy.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const legacyText = await readSseUntil(
      legacy,
      (text) => (text.match(/: keep-alive\n\n/g) ?? []).length >= 2,
    );
    expect(legacyText).toMatch(/^event: endpoint\ndata: \S+\n\n(: keep-alive\n\n){2}/);

    const opened = await post(`${bed.gw.url}/mcp`, INITIALIZE, { "x-api-key": alice.apiKey });
    const sessionId = opened.headers.get("mcp-session-id") ?? "";
    await opened.text();
    const standalone = await fetch(`${bed.gw.url}/mcp`, {
      headers: {
        "x-api-key": alice.apiKey,
        "mcp-session-id": sessionId,
        accept: "text/event-stream",
        "mcp-protocol-version": "2025-03-26",
      },
    });
    expect(standalone.status).toBe(200);
    expect(await readSseUntil(standalone, (text) => text.includes(": keepalive\n\n"))).toContain(
      ": keepalive",
    );
  });

  it("expires sessions after the idle timeout and frees everything they held", async () => {
    const alice = await bed.register("alice");
    const streamable = await bed.client("streamable", alice.apiKey);
    const legacy = await bed.client("sse", alice.apiKey);
    await streamable.mcp.subscribeResource({ uri: "tasks://pending" });
    await legacy.mcp.subscribeResource({ uri: "tasks://pending" });
    expect(bed.mcp.stats()).toEqual({
      sessions: 2,
      idleTimers: 2,
      subscriptions: 2,
      streamTimers: 1,
      runs: 0,
    });

    // Traffic keeps a session alive: this one is used more often than the timeout.
    for (let i = 0; i < 8; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      await streamable.listAgents();
    }
    expect(bed.mcp.stats().sessions).toBe(1); // the idle legacy session is gone
    await until(
      () => bed.mcp.stats(),
      (s) => s.sessions === 0,
      "the streamable session expires too",
    );
    expect(bed.mcp.stats()).toEqual({
      sessions: 0,
      idleTimers: 0,
      subscriptions: 0,
      streamTimers: 0,
      runs: 0,
    });
    const expired = await streamable.listAgents().catch((err: Error) => err);
    expect(String(expired)).toMatch(/404|expired/);
  });

  it("frees a session when its client closes it (DELETE, or the SSE stream ends)", async () => {
    const alice = await bed.register("alice");
    const client = await bed.sdkClient("streamable", alice.apiKey);
    const legacy = await bed.client("sse", alice.apiKey);
    await client.subscribeResource({ uri: "tasks://pending" });
    expect(bed.mcp.stats().sessions).toBe(2);
    await (client.transport as StreamableHTTPClientTransport).terminateSession();
    await legacy.close();
    await until(
      () => bed.mcp.stats(),
      (s) => s.sessions === 0,
      "both sessions are closed",
    );
    expect(bed.mcp.stats()).toEqual({
      sessions: 0,
      idleTimers: 0,
      subscriptions: 0,
      streamTimers: 0,
      runs: 0,
    });
  });
});
