/**
 * The gateway never takes its own address from a request. Its built-in agents (the MCP endpoint's
 * bridge agent, the A2A bridge agents) hold API keys; were they to reach the gateway at a URL built
 * from a request's Host header, any caller could name a host of its own and receive the key. The
 * replay: a TLS gateway (where the address used to come from Host), a listener standing for the
 * attacker's host, and calls with `Host: localhost:<listener>`: the listener must receive nothing,
 * not even a connection, and the calls must still work.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import { inProcessAgentOptions } from "../../src/orchestration/in-process-agent.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { tlsCertificate } from "../helpers/tls.js";
import { useTmpDir } from "../helpers/tmp.js";
import {
  jsonRpcMessages,
  type RawResponse,
  type RecordingListener,
  rawRequest,
  recordingListener,
} from "./helpers.js";

describe("the gateway's own address", () => {
  const tmp = useTmpDir("acp-sec-self-");
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  async function tlsGateway(dataDir: string, tls: { cert: string; key: string }): Promise<TestGateway> {
    const gw = await startTestGateway({ dataDir, tls });
    cleanups.push(() => gw.close());
    return gw;
  }

  async function attacker(): Promise<RecordingListener> {
    const listener = await recordingListener();
    cleanups.push(() => listener.close());
    return listener;
  }

  /** Registers an agent in the gateway's registry (the TLS gateway's REST API needs the test CA). */
  async function register(gw: TestGateway, agentId: string, capabilities: string[] = []) {
    const identity = generateIdentity(agentId, `principal-of-${agentId}`);
    const { apiKey } = await gw.gateway.context.registry.register({
      ...publicIdentity(identity),
      capabilities,
    });
    return { identity, apiKey };
  }

  /** An agent answering every request with `{echo: body}`, connected to `gw` in process. */
  async function echoAgent(gw: TestGateway, agentId: string, capabilities: string[] = []) {
    const { identity, apiKey } = await register(gw, agentId, capabilities);
    const agent = new AcpAgent({
      ...inProcessAgentOptions(gw.gateway.context),
      identity,
      apiKey,
      audit: false,
      state: false,
      requestTimeoutMs: 10_000,
    });
    agent.onRequest((body) => ({ echo: body }));
    await agent.connect();
    cleanups.push(() => agent.close());
    return agent;
  }

  it("MCP: a Host naming the attacker is refused at the door; agents/run goes in process; the attacker hears nothing", async () => {
    const dir = tmp();
    const tls = tlsCertificate(dir);
    const ca = readFileSync(tls.cert);
    const gw = await tlsGateway(join(dir, "data"), tls);
    const evil = await attacker();
    await echoAgent(gw, "target");
    const { apiKey } = await register(gw, "mallory");
    const mcp = (host: string, body: unknown, session?: string) =>
      rawRequest(`${gw.url}/mcp`, {
        ca,
        body: JSON.stringify(body),
        headers: {
          host,
          "x-api-key": apiKey,
          accept: "application/json, text/event-stream",
          ...(session && { "mcp-session-id": session }),
        },
      });
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "mallory", version: "1" },
      },
    };

    // Bound to loopback, the gateway refuses a Host that is not its own (docs/security.md, "Browser origins").
    const refused = await mcp(`localhost:${evil.port}`, initialize);
    expect(refused.status).toBe(403);

    // With its own Host the run works, and the bridge agent that carries it reaches no address at all.
    const host = new URL(gw.url).host;
    const opened = await mcp(host, initialize);
    expect(opened.status).toBe(200);
    const session = String(opened.headers["mcp-session-id"]);
    await mcp(host, { jsonrpc: "2.0", method: "notifications/initialized" }, session);
    const run = await mcp(
      host,
      { jsonrpc: "2.0", id: 2, method: "agents/run", params: { name: "target", input: { text: "hi" } } },
      session,
    );
    expect(resultOf(run, 2)).toMatchObject({ output: { echo: { text: "hi" } } });
    expect(evil.connections).toBe(0);
    expect((await rawRequest(`${gw.url}/healthz`, { ca })).status).toBe(200);
  });

  it("A2A: the first call after a restart, with Host: <attacker>, fixes no address for anyone", async () => {
    const dir = tmp();
    const tls = tlsCertificate(dir);
    const ca = readFileSync(tls.cert);
    const data = join(dir, "data");
    const first = await tlsGateway(data, tls);
    const mallory = await register(first, "mallory");
    const bob = await register(first, "bob");
    const target = await register(first, "helper", ["a2a"]);
    await first.close();

    // Restarted: nothing has fixed the bridge's way to the gateway yet.
    const gw = await tlsGateway(data, tls);
    const evil = await attacker();
    const helper = new AcpAgent({
      ...inProcessAgentOptions(gw.gateway.context),
      identity: target.identity,
      apiKey: target.apiKey,
      audit: false,
      state: false,
    });
    helper.onRequest((body) => ({ text: `echo: ${JSON.stringify(body)}` }));
    await helper.connect();
    cleanups.push(() => helper.close());
    const send = (apiKey: string, host: string, text: string) =>
      rawRequest(`${gw.url}/a2a/helper`, {
        ca,
        headers: { host, "x-api-key": apiKey },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: text,
          method: "SendMessage",
          params: { message: { messageId: text, role: "ROLE_USER", parts: [{ text }] } },
        }),
      });

    const attack = await send(mallory.apiKey, `localhost:${evil.port}`, "from mallory");
    const honest = await send(bob.apiKey, `127.0.0.1:${new URL(gw.url).port}`, "from bob");

    for (const [answer, text] of [
      [attack, "from mallory"],
      [honest, "from bob"],
    ] as const) {
      const task = resultOf(answer, text) as { task?: { status?: { state?: string } } };
      expect(task.task?.status?.state).toBe("TASK_STATE_COMPLETED");
      expect(JSON.stringify(task)).toContain(text);
    }
    expect(evil.connections).toBe(0);
    expect((await rawRequest(`${gw.url}/healthz`, { ca })).status).toBe(200);
  });
});

describe("the URLs the gateway gives out (A2A agent cards)", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  async function cardWith(gw: TestGateway, host: string) {
    await gw.register("helper", "p-helper", { capabilities: ["a2a"] });
    const answer = await rawRequest(`${gw.url}/a2a/helper/.well-known/agent-card.json`, {
      headers: { host },
    });
    const card = JSON.parse(answer.text) as { supportedInterfaces: { url: string }[] };
    return { urls: card.supportedInterfaces.map((i) => i.url), headers: answer.headers };
  }

  it("name the address the gateway listens on, whatever the Host: nothing for a shared cache to poison", async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const { urls, headers } = await cardWith(gw, "evil.example.com");
    expect(urls).toEqual([`${gw.url}/a2a/helper`, `${gw.url}/a2a/helper`]);
    expect(headers["cache-control"]).toBe("max-age=60");
  });

  it("name the configured public URL", async () => {
    const gw = await startTestGateway({ publicUrl: "https://acp.example.com/gateway/" });
    cleanups.push(() => gw.close());
    const { urls } = await cardWith(gw, "evil.example.com");
    expect(urls[0]).toBe("https://acp.example.com/gateway/a2a/helper");
  });
});

function resultOf(response: RawResponse, id: unknown): unknown {
  const answer = jsonRpcMessages(response).find((message) => message.id === id);
  if (!answer) throw new Error(`no answer to ${String(id)}: HTTP ${response.status} ${response.text}`);
  if (answer.error) throw new Error(`error answer to ${String(id)}: ${JSON.stringify(answer.error)}`);
  return answer.result;
}
