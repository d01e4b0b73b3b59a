/**
 * Rotating a leaked API key, or revoking the agent, cuts off what the old key opened: its
 * WebSocket (a submit sent on it right after the rotation is not taken), its MCP sessions
 * (Streamable HTTP and legacy SSE) and its event streams, at this gateway and at another gateway
 * on the same NATS; a revoked agent's socket closes and gets no redeliveries.
 */
import { join } from "node:path";
import {
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { afterEach, describe, expect, it } from "vitest";
import { buildAnnounce, signMessage } from "../../src/protocol/index.js";
import { collabExtension, type McpEndpointExtension, mcpEndpointExtension } from "../../src/server.js";
import { agentFor, deferred, SCHEDULING_ANNOUNCE } from "../client/fixtures.js";
import { sendRequest } from "../extensions/a2a/inbound-bed.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";

interface Bed {
  gw: TestGateway;
  mcp: McpEndpointExtension;
}

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
};

async function startBed(dir: string, extra: { natsUrl?: string; delivery?: object } = {}): Promise<Bed> {
  const collab = collabExtension({ auditRoot: join(dir, "collab-audit") });
  const mcp = mcpEndpointExtension({ tasks: collab.handoffs });
  const gw = await startTestGateway({ dataDir: dir, extensions: [collab, mcp], ...extra });
  return { gw, mcp };
}

/** Opens a Streamable HTTP MCP session with `apiKey`; returns its id. */
async function mcpSession(gw: TestGateway, apiKey: string): Promise<string> {
  const res = await fetch(`${gw.url}/mcp`, {
    method: "POST",
    headers: {
      "x-api-key": apiKey,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify(INITIALIZE),
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get("mcp-session-id") as string;
}

/** An event stream opened with `apiKey`, and a promise that settles when the server ends it. */
async function openStream(url: string, apiKey: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers: { "x-api-key": apiKey, accept: "text/event-stream", ...headers } });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const ended = (async () => {
    for (;;) if ((await reader.read()).done) return true;
  })();
  return { ended, cancel: () => reader.cancel().catch(() => undefined) };
}

function announce(from: TestAgent, to: string) {
  return signMessage(buildAnnounce(from.sender, to, SCHEDULING_ANNOUNCE), from.signer);
}

const rotate = (gw: TestGateway, agent: TestAgent) =>
  api(gw.url, `/api/v1/agents/${agent.sender.agentId}/rotate`, { apiKey: agent.apiKey, method: "POST" });
const revoke = (gw: TestGateway, agentId: string) =>
  api(gw.url, `/api/v1/agents/${agentId}/revoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${gw.adminToken}` },
  });

describe("rotating or revoking a key cuts what the old key opened", () => {
  const tmp = useTmpDir("acp-rotation-");
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined);
  });

  it("a rotation closes the WebSocket, MCP sessions and event streams, and refuses the socket's last frame", async () => {
    const { gw, mcp } = await startBed(tmp());
    closing.push(() => gw.close());
    const alpha = await gw.register("agent-alpha");
    await gw.register("agent-beta");

    const socket = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    await socket.next("ready");
    const streamableId = await mcpSession(gw, alpha.apiKey);
    const streamable = await openStream(`${gw.url}/mcp`, alpha.apiKey, {
      "mcp-session-id": streamableId,
      "mcp-protocol-version": "2025-06-18",
    });
    const legacy = await openStream(`${gw.url}/mcp/sse`, alpha.apiKey);
    const status = await openStream(`${gw.url}/api/v1/status/stream`, alpha.apiKey);
    closing.push(streamable.cancel, legacy.cancel, status.cancel);
    await expect.poll(() => mcp.stats().sessions).toBe(2);

    const rotated = await rotate(gw, alpha);
    expect(rotated.status).toBe(200);
    // Sent on the old socket the moment the rotation is answered.
    const late = announce(alpha, "agent-beta");
    socket.send({ type: "submit", ref: 1, envelope: late });

    await expect(socket.next("submitted")).rejects.toThrow(/socket closed \(4401 the API key was rotated\)/);
    expect(await streamable.ended).toBe(true);
    expect(await legacy.ended).toBe(true);
    expect(await status.ended).toBe(true);
    expect(mcp.stats().sessions).toBe(0);

    // Unchanged: the late submit was not taken; the old MCP session is gone for the new key too.
    expect(
      await gw.gateway.broker.get({ from: "agent-alpha", id: late.params.headers["message-id"] as string }),
    ).toBeNull();
    const fresh = rotated.json.apiKey as string;
    const reuse = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers: {
        "x-api-key": fresh,
        "mcp-session-id": streamableId,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
    });
    expect(reuse.status).toBe(404);
    expect((await api(gw.url, "/api/v1/agents", { apiKey: alpha.apiKey })).status).toBe(401);

    // Healthy: the new key opens a socket that submits, and a new MCP session.
    const renewed = await FrameClient.connect(gw.gateway.wsUrl, fresh);
    await renewed.next("ready");
    renewed.send({ type: "submit", ref: 2, envelope: announce(alpha, "agent-beta") });
    expect((await renewed.next("submitted", (f) => f.ref === 2)).duplicate).toBe(false);
    await mcpSession(gw, fresh);
    expect(mcp.stats().sessions).toBe(1);
    await renewed.close();
  });

  it("a rotation ends an A2A answer streaming to the old key", async () => {
    const dir = tmp();
    const { gw } = await startBed(dir);
    closing.push(() => gw.close());
    const helper = await gw.register("helper", "principal-helper", { capabilities: ["a2a"] });
    const agent = agentFor(gw, helper, join(dir, "helper"));
    await agent.connect();
    closing.push(() => agent.close());
    const release = deferred();
    agent.onRequest(async (body, context) => {
      const { taskId } = body.a2a as { taskId: string };
      await agent.notify(context.from, { taskId, text: "halfway" }, { method: "agent.a2a.progress" });
      await release.promise;
      return { text: "done" };
    });
    closing.push(async () => release.resolve());
    const caller = await gw.register("alice-client", "principal-alice");
    const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
      headers: async () => ({ authorization: `Bearer ${caller.apiKey}` }),
      shouldRetryWithHeaders: async () => undefined,
    });
    const client = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
      }),
    ).createFromUrl(`${gw.url}/a2a/helper/`);

    const events: string[] = [];
    let rotated = false;
    const streamed = (async () => {
      for await (const event of client.sendMessageStream(sendRequest("work"))) {
        events.push(event.payload?.$case ?? "none");
        // The agent said "halfway" and waits: the stream is open. Now the key leaks and is rotated.
        if (events.length === 3 && !rotated) {
          rotated = true;
          expect((await rotate(gw, caller)).status).toBe(200);
        }
      }
    })();
    await streamed.catch(() => undefined);
    expect(rotated).toBe(true);
    // Ended before the agent answered: no artifact, no completion reached the old key.
    expect(events).toEqual(["task", "statusUpdate", "statusUpdate"]);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });

  it("a revocation closes the agent's socket and MCP session; nothing is redelivered to it", async () => {
    const { gw, mcp } = await startBed(tmp(), {
      delivery: { ackWaitMs: 200, maxDeliver: 5, backoffFactor: 1 },
    });
    closing.push(() => gw.close());
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    const socket = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await socket.next("ready");
    await mcpSession(gw, beta.apiKey);
    const sent = await api(gw.url, "/api/v1/messages", {
      apiKey: alpha.apiKey,
      body: announce(alpha, "agent-beta"),
    });
    expect(sent.status).toBe(202);
    // Delivered, never acknowledged: before the revocation it would come again every 200 ms.
    expect((await socket.next("new_message")).id).toBe(sent.json.id);

    expect((await revoke(gw, "agent-beta")).status).toBe(200);
    await expect(socket.next("new_message")).rejects.toThrow(/socket closed \(4401 the agent was revoked\)/);
    expect(socket.pending()).toEqual([]);
    expect(mcp.stats().sessions).toBe(0);

    // Healthy: alpha's socket still works; beta cannot come back.
    const other = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    await other.next("ready");
    await other.close();
    const again = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await expect(again.next("ready")).rejects.toThrow(/4401/);
  });
});

describeWithNats("rotation and revocation reach every gateway on one NATS", () => {
  const nats = useNatsServer();
  const tmp = useTmpDir("acp-rotation-nats-");
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined);
  });

  it("a key rotated at one gateway closes the socket and MCP session another gateway holds for it", async () => {
    const server = await nats();
    const a = await startBed(tmp(), { natsUrl: server.url });
    closing.push(() => a.gw.close());
    const b = await startBed(tmp(), { natsUrl: server.url });
    closing.push(() => b.gw.close());
    const alpha = await a.gw.register("agent-alpha");
    const beta = await a.gw.register("agent-beta");

    const socket = await FrameClient.connect(b.gw.gateway.wsUrl, alpha.apiKey);
    await socket.next("ready");
    await mcpSession(b.gw, alpha.apiKey);
    const betaSocket = await FrameClient.connect(b.gw.gateway.wsUrl, beta.apiKey);
    await betaSocket.next("ready");
    expect(b.mcp.stats().sessions).toBe(1);

    const rotated = await rotate(a.gw, alpha);
    expect(rotated.status).toBe(200);
    await expect(socket.next("ready")).rejects.toThrow(/socket closed \(4401 the API key was rotated\)/);
    await expect.poll(() => b.mcp.stats().sessions).toBe(0);

    expect((await revoke(a.gw, "agent-beta")).status).toBe(200);
    await expect(betaSocket.next("ready")).rejects.toThrow(/socket closed \(4401 the agent was revoked\)/);

    // Healthy: the new key works at the other gateway.
    const renewed = await FrameClient.connect(b.gw.gateway.wsUrl, rotated.json.apiKey as string);
    await renewed.next("ready");
    await renewed.close();
  });
});
