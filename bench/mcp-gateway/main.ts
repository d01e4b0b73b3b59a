/**
 * `npm run bench -- mcp-gateway`: `agents/run` round trips per second through the gateway's MCP
 * endpoint, beside a plain MCP SDK server's echo tool (`tools/call`), 64 concurrent sessions over
 * Streamable HTTP (SSE responses, the gateway's mode). Through the gateway a run is a real ACP
 * exchange: the bridge agent signs an `agent.mcp.run` request, the relay verifies and persists it,
 * the target agent (an AcpAgent serving `echo` with serveMcpAgent) verifies it and answers with a
 * signed response that travels back the same way. The gateway (embedded broker) and the target run
 * in one child process, the SDK server in another; the load generator here speaks raw HTTP.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import pino from "pino";
import { z } from "zod";
import { AcpAgent } from "../../src/client/index.js";
import { serveMcpAgent } from "../../src/client/mcp-agent.js";
import { startDefaultGateway } from "../../src/server.js";
import { serveMcpOverHttp } from "../../src/mcp/index.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";

type Target = "sdk-tool" | "gateway-run";

const CONCURRENCY = 64;
const WARMUP_MS = 2_000;
const MEASURE_MS = 5_000;
const ROUNDS = 2;
const PROTOCOL_VERSION = "2025-06-18";
const ADMIN = "bench-admin-token-0123456789";

// ---- server side (child process) ----

async function serveGateway(): Promise<() => Promise<void>> {
  const data = mkdtempSync(join(tmpdir(), "acp-bench-mcp-gw-"));
  const gateway = await startDefaultGateway({
    port: 0,
    data,
    adminToken: ADMIN,
    audit: false,
    logger: pino({ level: "silent" }),
    limits: { ratePerSecond: 1_000_000, burst: 1_000_000 },
  });
  const register = async (agentId: string) => {
    const identity = generateIdentity(agentId, `principal-${agentId}`);
    const res = await fetch(`${gateway.url}/api/v1/agents`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify(publicIdentity(identity)),
    });
    const { apiKey } = (await res.json()) as { apiKey: string };
    return { identity, apiKey };
  };
  const target = await register("target");
  const caller = await register("caller");
  const agent = new AcpAgent({ gateway: gateway.url, ...target, audit: false, state: false });
  await agent.connect();
  const text = z.object({ text: z.string() });
  await serveMcpAgent(agent, "echo", { input: text, output: text }, ({ text }) => ({ text }), {
    apiKey: target.apiKey,
  });
  process.send?.({ url: `${gateway.url}/mcp`, apiKey: caller.apiKey, name: "target/echo" });
  return async () => {
    await agent.close();
    await gateway.close();
    rmSync(data, { recursive: true, force: true });
  };
}

async function serveSdk(): Promise<() => Promise<void>> {
  const host = await serveMcpOverHttp({
    createServer: () => {
      const server = new McpServer({ name: "bench-sdk", version: "1.0.0" });
      server.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => ({
        content: [{ type: "text", text }],
      }));
      return server;
    },
  });
  process.send?.({ url: host.url, name: "echo" });
  return () => host.close();
}

async function serve(target: Target): Promise<void> {
  const stop = target === "gateway-run" ? await serveGateway() : await serveSdk();
  process.on("message", (message: string) => {
    if (message === "cpu") process.send?.({ cpu: process.cpuUsage() });
    if (message === "stop") void stop().then(() => process.exit(0));
  });
}

// ---- load generator (this process) ----

interface Endpoint {
  url: string;
  apiKey?: string;
  name: string;
}

async function post(endpoint: Endpoint, body: unknown, sessionId?: string) {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL_VERSION,
  };
  if (endpoint.apiKey !== undefined) headers["x-api-key"] = endpoint.apiKey;
  if (sessionId !== undefined) headers["mcp-session-id"] = sessionId;
  const response = await fetch(endpoint.url, { method: "POST", headers, body: JSON.stringify(body) });
  return { response, text: await response.text() };
}

function lastMessage(text: string): { result?: Record<string, unknown>; error?: unknown } {
  if (text.startsWith("{")) return JSON.parse(text);
  const last = text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .at(-1);
  if (last === undefined) throw new Error(`no data in response: ${text.slice(0, 200)}`);
  return JSON.parse(last.slice(6));
}

async function openSession(endpoint: Endpoint): Promise<string> {
  const { response, text } = await post(endpoint, {
    jsonrpc: "2.0",
    id: 0,
    method: "initialize",
    params: {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "bench", version: "1" },
    },
  });
  const id = response.headers.get("mcp-session-id");
  if (id === null) throw new Error(`no session: ${response.status} ${text}`);
  await post(endpoint, { jsonrpc: "2.0", method: "notifications/initialized" }, id);
  return id;
}

function call(target: Target, endpoint: Endpoint, id: number, text: string) {
  return target === "gateway-run"
    ? { jsonrpc: "2.0", id, method: "agents/run", params: { name: endpoint.name, input: { text } } }
    : { jsonrpc: "2.0", id, method: "tools/call", params: { name: endpoint.name, arguments: { text } } };
}

function echoed(target: Target, result: Record<string, unknown> | undefined): unknown {
  if (target === "gateway-run") return (result?.output as { text?: unknown } | undefined)?.text;
  return (result?.content as { text?: unknown }[] | undefined)?.[0]?.text;
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  cpuMicrosPerCall: number;
}

async function measure(target: Target): Promise<Measurement> {
  const child = fork(fileURLToPath(import.meta.url), ["serve", target], { stdio: "inherit" });
  try {
    const endpoint = await nextMessage<Endpoint>(child);
    const sessions = await Promise.all(Array.from({ length: CONCURRENCY }, () => openSession(endpoint)));
    let recording = false;
    let stopped = false;
    const latencies: number[] = [];
    const worker = async (session: string, index: number) => {
      for (let n = 1; !stopped; n++) {
        const text = `hello ${index}/${n}`;
        const started = performance.now();
        const { text: body } = await post(endpoint, call(target, endpoint, n, text), session);
        if (echoed(target, lastMessage(body).result) !== text)
          throw new Error(`bad answer: ${body.slice(0, 300)}`);
        if (recording && !stopped) latencies.push(performance.now() - started);
      }
    };
    const running = sessions.map((session, index) => worker(session, index));
    await sleep(WARMUP_MS);
    const cpuBefore = await cpuOf(child);
    recording = true;
    const started = performance.now();
    await sleep(MEASURE_MS);
    stopped = true;
    const elapsed = performance.now() - started;
    const cpuAfter = await cpuOf(child);
    await Promise.all(running);
    latencies.sort((a, b) => a - b);
    const percentile = (p: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
    return {
      rps: (latencies.length / elapsed) * 1000,
      p50: percentile(0.5),
      p99: percentile(0.99),
      cpuMicrosPerCall: (cpuAfter - cpuBefore) / latencies.length,
    };
  } finally {
    child.send("stop");
    await new Promise((resolve) => child.once("exit", resolve));
  }
}

function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    child.once("message", (message) => resolve(message as T));
    child.once("exit", (code) => reject(new Error(`server exited with code ${code}`)));
  });
}

async function cpuOf(child: ChildProcess): Promise<number> {
  const reply = nextMessage<{ cpu: NodeJS.CpuUsage }>(child);
  child.send("cpu");
  const { cpu } = await reply;
  return cpu.user + cpu.system;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function main(): Promise<void> {
  const label: Record<Target, string> = {
    "sdk-tool": "plain MCP SDK server, tools/call echo (in-process tool)",
    "gateway-run": "gateway /mcp, agents/run of an ACP agent's echo (signed ACP round trip)",
  };
  console.log(
    `MCP round trips over Streamable HTTP (SSE responses, 127.0.0.1), ${CONCURRENCY} concurrent sessions, ` +
      `${MEASURE_MS / 1000} s per run, best of ${ROUNDS} rounds (order alternates)\n` +
      "server CPU: gateway + target agent (one process) vs the SDK server\n",
  );
  const results: Record<Target, Measurement[]> = { "sdk-tool": [], "gateway-run": [] };
  for (let round = 0; round < ROUNDS; round++) {
    const order: Target[] = round % 2 === 0 ? ["sdk-tool", "gateway-run"] : ["gateway-run", "sdk-tool"];
    for (const target of order) results[target].push(await measure(target));
  }
  const best = (target: Target) => results[target].reduce((a, b) => (b.rps > a.rps ? b : a));
  const rows = [["server", "round trips/s", "p50 ms", "p99 ms", "server CPU µs/call"]];
  for (const target of ["sdk-tool", "gateway-run"] as const) {
    const m = best(target);
    rows.push([
      label[target],
      Math.round(m.rps).toLocaleString("en-US"),
      m.p50.toFixed(1),
      m.p99.toFixed(1),
      Math.round(m.cpuMicrosPerCall).toString(),
    ]);
  }
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  for (const row of rows) {
    console.log(
      row.map((cell, i) => (i >= 1 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join("  "),
    );
  }
  const ratio = best("gateway-run").rps / best("sdk-tool").rps;
  console.log(
    `\nagents/run through the gateway vs the SDK's in-process echo tool: ${ratio.toFixed(2)}× the round trips/s`,
  );
}

if (process.argv[2] === "serve") {
  await serve(process.argv[3] as Target);
} else {
  await main();
}
