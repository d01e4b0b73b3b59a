/**
 * `npm run bench -- mcp`: `agents/run` round trips per second through our MCP server vs a plain MCP
 * SDK server's echo tool (`tools/call`), both on the same Streamable HTTP host (node:http, one SDK
 * transport and one server per session), in both response modes (SSE stream, plain JSON), with 64
 * concurrent clients. Each server runs in its own child process; the load generator here speaks raw
 * HTTP JSON-RPC so that it costs as little CPU as possible and the servers are what is measured.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { createAgentsMcpServer, type McpHttpHost, serveMcpOverHttp } from "../../src/mcp/index.js";

type ServerKind = "sdk-tool" | "agents-run";
type Mode = "sse" | "json";

const CONCURRENCY = 64;
const WARMUP_MS = 1_500;
const MEASURE_MS = 4_000;
const ROUNDS = 3;
const PROTOCOL_VERSION = "2025-06-18";

// ---- server side (child process) ----

function createServer(kind: ServerKind): McpServer {
  const text = z.object({ text: z.string() });
  if (kind === "agents-run") {
    const server = createAgentsMcpServer({ name: "bench-agents", version: "1.0.0" });
    server.agent("echo", { description: "echo", input: text, output: text }, async ({ text }) => ({ text }));
    return server;
  }
  const server = new McpServer({ name: "bench-sdk", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "echo", inputSchema: { text: z.string() } },
    async ({ text }) => ({
      content: [{ type: "text", text }],
    }),
  );
  return server;
}

async function serve(kind: ServerKind, mode: Mode): Promise<void> {
  const host: McpHttpHost = await serveMcpOverHttp({
    createServer: () => createServer(kind),
    enableJsonResponse: mode === "json",
  });
  process.on("message", (message: string) => {
    if (message === "cpu") process.send?.({ cpu: process.cpuUsage() });
    if (message === "stop") void host.close().then(() => process.exit(0));
  });
  process.send?.({ url: host.url });
}

// ---- load generator (this process) ----

interface Session {
  id: string;
}

async function post(
  url: string,
  body: unknown,
  sessionId?: string,
): Promise<{ response: Response; text: string }> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL_VERSION,
  };
  if (sessionId !== undefined) headers["mcp-session-id"] = sessionId;
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  return { response, text: await response.text() };
}

/** The JSON-RPC message of a response body, whether plain JSON or an SSE stream. */
function parseBody(text: string): { result?: Record<string, unknown>; error?: unknown } {
  if (text.startsWith("{")) return JSON.parse(text);
  const data = text.split("\n").filter((line) => line.startsWith("data: "));
  const last = data.at(-1);
  if (last === undefined) throw new Error(`no data in response: ${text.slice(0, 200)}`);
  return JSON.parse(last.slice(6));
}

async function openSession(url: string): Promise<Session> {
  const { response, text } = await post(url, {
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
  await post(url, { jsonrpc: "2.0", method: "notifications/initialized" }, id);
  return { id };
}

function requestFor(kind: ServerKind, id: number, text: string): unknown {
  return kind === "agents-run"
    ? { jsonrpc: "2.0", id, method: "agents/run", params: { name: "echo", input: { text } } }
    : { jsonrpc: "2.0", id, method: "tools/call", params: { name: "echo", arguments: { text } } };
}

function echoed(kind: ServerKind, result: Record<string, unknown> | undefined): unknown {
  if (kind === "agents-run") return (result?.output as { text?: unknown } | undefined)?.text;
  return (result?.content as { text?: unknown }[] | undefined)?.[0]?.text;
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  cpuMicrosPerCall: number;
}

async function measure(kind: ServerKind, mode: Mode): Promise<Measurement> {
  const child = fork(fileURLToPath(import.meta.url), ["serve", kind, mode], { stdio: "inherit" });
  try {
    const url = await nextMessage<{ url: string }>(child).then((m) => m.url);
    const sessions = await Promise.all(Array.from({ length: CONCURRENCY }, () => openSession(url)));
    let recording = false;
    let stopped = false;
    const latencies: number[] = [];
    const worker = async (session: Session, index: number) => {
      for (let n = 1; !stopped; n++) {
        const text = `hello ${index}/${n}`;
        const started = performance.now();
        const { text: body } = await post(url, requestFor(kind, n, text), session.id);
        const message = parseBody(body);
        if (echoed(kind, message.result) !== text) throw new Error(`bad answer: ${body.slice(0, 300)}`);
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

function best(runs: Measurement[]): Measurement {
  return runs.reduce((a, b) => (b.rps > a.rps ? b : a));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

async function main(): Promise<void> {
  const label: Record<ServerKind, string> = {
    "sdk-tool": "plain MCP SDK server, tools/call echo",
    "agents-run": "acp-kit AgentsMcpServer, agents/run echo",
  };
  console.log(
    `MCP round trips over Streamable HTTP (node:http, 127.0.0.1), ${CONCURRENCY} concurrent sessions, ` +
      `${MEASURE_MS / 1000} s per run, ${ROUNDS} rounds (order alternates; each server in its own process)\n` +
      "round trips/s and latencies: the best round; server CPU: the median round (steadier on a busy machine)\n",
  );
  const rows: string[][] = [["mode", "server", "round trips/s", "p50 ms", "p99 ms", "server CPU µs/call"]];
  const ratios: string[] = [];
  for (const mode of ["sse", "json"] as const) {
    const results: Record<ServerKind, Measurement[]> = { "sdk-tool": [], "agents-run": [] };
    for (let round = 0; round < ROUNDS; round++) {
      // Alternating who goes first keeps a drifting machine load from favouring one server.
      const order =
        round % 2 === 0 ? (["sdk-tool", "agents-run"] as const) : (["agents-run", "sdk-tool"] as const);
      for (const kind of order) results[kind].push(await measure(kind, mode));
    }
    const cpu = (kind: ServerKind) => median(results[kind].map((m) => m.cpuMicrosPerCall));
    for (const kind of ["sdk-tool", "agents-run"] as const) {
      const m = best(results[kind]);
      rows.push([
        mode === "sse" ? "SSE response" : "JSON response",
        label[kind],
        Math.round(m.rps).toLocaleString("en-US"),
        m.p50.toFixed(1),
        m.p99.toFixed(1),
        Math.round(cpu(kind)).toString(),
      ]);
    }
    const throughput = best(results["agents-run"]).rps / best(results["sdk-tool"]).rps;
    const cpuRatio = cpu("sdk-tool") / cpu("agents-run");
    ratios.push(
      `${mode === "sse" ? "SSE " : "JSON"} mode, agents/run vs tools/call: ${throughput.toFixed(2)}× the round trips/s, ` +
        `${cpuRatio.toFixed(2)}× the calls per CPU second`,
    );
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows) {
    console.log(
      row
        .map((cell, column) => (column >= 2 ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)))
        .join("  "),
    );
  }
  console.log("");
  for (const line of ratios) console.log(line);
}

if (process.argv[2] === "serve") {
  await serve(process.argv[3] as ServerKind, process.argv[4] as Mode);
} else {
  await main();
}
