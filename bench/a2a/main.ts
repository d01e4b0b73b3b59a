/**
 * `npm run bench -- a2a`: an A2A client's `SendMessage` (the A2A JS SDK's own client, JSON-RPC over
 * HTTP) through the gateway's A2A bridge to an ACP agent, beside the same client against the A2A
 * SDK's echo server directly (express + DefaultRequestHandler, bench/gateway/peer-server.ts).
 *
 * Through the bridge a call is a real ACP exchange: the caller's bridge identity signs an
 * `agent.request`, the relay verifies, persists (embedded broker) and audits it, the target
 * AcpAgent verifies it and answers with a signed response (audited too) that travels back the same
 * way, and the answer becomes the A2A task's artifact.
 *
 * Processes: the gateway (with its A2A bridge) in one child, the target ACP agent in another (a
 * real agent is its own process, connected over the gateway's WebSocket), the echo server in a
 * third; the load generator (64 concurrent callers) runs here. "Server CPU" is the gateway's CPU
 * per call against the echo server's; the ACP agent's CPU per call is measured in the same run
 * and printed beside it, not added. The target: the bridge costs at most 2× a direct call.
 *
 * A third row, "acp", is the bridge's ACP half alone, measured in the same run: an AcpAgent in this
 * process sends the same text as a signed `agent.request` to the same target through the same
 * gateway (WebSocket) and awaits its response. Bridge minus that row is what the A2A side costs.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Role, type SendMessageRequest } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import pino from "pino";
import { AcpAgent } from "../../src/client/index.js";
import { startDefaultGateway } from "../../src/server.js";
import { generateIdentity, type PrivateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { cpuSecondsOf, forkPeerServer, stopChild } from "../gateway/processes.js";
import { hotSpots } from "../gateway/profile.js";

type Target = "a2a-echo" | "bridge" | "acp";

const CONCURRENCY = 64;
const WARMUP_MS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2) * 1000;
const MEASURE_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** BENCH_ONLY=bridge (or a2a-echo, acp, comma-separated): measure some rows only, e.g. to compare two builds of the bridge. */
const ONLY = process.env.BENCH_ONLY?.split(",") ?? ["a2a-echo", "bridge", "acp"];
const ADMIN = "bench-admin-token-0123456789";
const TEXT = "x".repeat(700);
/** BENCH_A2A_PROFILE=1: the gateway's process runs with --cpu-prof; its hot spots are printed at the end. */
const ROLE = process.argv[2];
/** Made by the load generator only: the server processes run this same file. */
const PROFILE_DIR =
  process.env.BENCH_A2A_PROFILE === "1" && ROLE === undefined
    ? mkdtempSync(join(tmpdir(), "acp-bench-a2a-prof-"))
    : undefined;

// ---- server side (child processes): the gateway with its A2A bridge; the target ACP agent ----

interface GatewayReady {
  url: string;
  a2aUrl: string;
  /** The A2A client's API key (an ACP agent of its own, without the capability a2a). */
  callerKey: string;
  /** The target ACP agent's identity and key, for the agent's process. */
  target: { identity: PrivateIdentity; apiKey: string };
  /** The ACP agent of the "acp" row (in the load generator). */
  requester: { identity: PrivateIdentity; apiKey: string };
}

async function serveGateway(): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), "acp-bench-a2a-"));
  const gateway = await startDefaultGateway({
    port: 0,
    data,
    adminToken: ADMIN,
    logger: pino({ level: "silent" }),
    limits: { ratePerSecond: 1_000_000, burst: 1_000_000 },
  });
  const register = async (agentId: string, capabilities: string[]) => {
    const identity = generateIdentity(agentId, `principal-${agentId}`);
    const res = await fetch(`${gateway.url}/api/v1/agents`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ ...publicIdentity(identity), capabilities }),
    });
    const { apiKey } = (await res.json()) as { apiKey: string };
    return { identity, apiKey };
  };
  const target = await register("echo", ["a2a", "echo"]);
  const caller = await register("a2a-caller", []);
  const requester = await register("acp-caller", []);
  const ready: GatewayReady = {
    url: gateway.url,
    a2aUrl: `${gateway.url}/a2a/echo/`,
    callerKey: caller.apiKey,
    target,
    requester,
  };
  process.send?.(ready);
  onStop(async () => {
    await gateway.close();
    rmSync(data, { recursive: true, force: true });
  });
}

/** The target: an ordinary AcpAgent (signature checks, handshake, audit log) that echoes the text. */
async function serveAgent(): Promise<void> {
  const { url, target } = await new Promise<GatewayReady>((resolve) =>
    process.once("message", (message) => resolve(message as GatewayReady)),
  );
  const data = mkdtempSync(join(tmpdir(), "acp-bench-a2a-agent-"));
  const agent = new AcpAgent({ gateway: url, ...target, audit: { root: join(data, "audit") }, state: false });
  agent.onRequest((body) => ({ text: body.text }));
  await agent.connect();
  process.send?.("ready");
  onStop(async () => {
    await agent.close();
    rmSync(data, { recursive: true, force: true });
  });
}

function onStop(cleanUp: () => Promise<void>): void {
  process.on("message", (message: unknown) => {
    if (message === "stop") void cleanUp().then(() => process.exit(0));
  });
}

// ---- load generator (this process) ----

function clientFor(url: string, apiKey?: string): Promise<Client> {
  const fetchImpl =
    apiKey === undefined
      ? fetch
      : createAuthenticatingFetchWithRetry(fetch, {
          headers: async () => ({ authorization: `Bearer ${apiKey}` }),
          shouldRetryWithHeaders: async () => undefined,
        });
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  });
  return new ClientFactory(options).createFromUrl(url);
}

function request(): SendMessageRequest {
  return {
    tenant: "",
    message: {
      messageId: crypto.randomUUID(),
      contextId: "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [
        {
          content: { $case: "text", value: TEXT },
          metadata: undefined,
          filename: "",
          mediaType: "text/plain",
        },
      ],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

/** The echoed text: the direct echo answers a Message, the bridge a completed Task with an artifact. */
function echoedText(result: Awaited<ReturnType<Client["sendMessage"]>>): string | undefined {
  const parts = "parts" in result ? result.parts : result.artifacts[0]?.parts;
  const content = parts?.[0]?.content;
  return content?.$case === "text" ? content.value : undefined;
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  cpuMicrosPerCall: number;
  /** The target ACP agent's CPU per call (bridge only). */
  agentCpuMicrosPerCall?: number;
}

interface Servers {
  /** One call; resolves to the text that came back. */
  call(): Promise<string | undefined>;
  close(): Promise<void>;
  /** The process whose CPU is the server's: the echo server, or the gateway. */
  server: ChildProcess;
  /** The target ACP agent's process (bridge only). */
  agent?: ChildProcess;
}

async function start(target: Target): Promise<Servers> {
  if (target === "a2a-echo") {
    const peer = await forkPeerServer("a2a-echo", {});
    return a2aServers(peer.child, await clientFor(peer.url));
  }
  const gateway = forkServer("gateway", PROFILE_DIR ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR] : []);
  const ready = await firstMessage<GatewayReady>(gateway, "the gateway");
  const agent = forkServer("agent", []);
  agent.send(ready);
  await firstMessage(agent, "the ACP agent");
  if (target === "bridge") {
    return { ...a2aServers(gateway, await clientFor(ready.a2aUrl, ready.callerKey)), agent };
  }
  // No audit or state here: the load generator's own costs are not measured, only kept small.
  const requester = new AcpAgent({ gateway: ready.url, ...ready.requester, audit: false, state: false });
  await requester.connect();
  return {
    server: gateway,
    agent,
    call: async () => (await requester.request("echo", { text: TEXT })).text as string | undefined,
    close: () => requester.close(),
  };
}

function a2aServers(server: ChildProcess, client: Client): Omit<Servers, "agent"> {
  return { server, call: async () => echoedText(await client.sendMessage(request())), close: async () => {} };
}

function forkServer(role: "gateway" | "agent", execArgv: string[]): ChildProcess {
  return fork(fileURLToPath(import.meta.url), [role], { stdio: "inherit", execArgv });
}

function firstMessage<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    child.once("message", (message) => resolve(message as T));
    child.once("exit", (code) => reject(new Error(`${what} exited with code ${code}`)));
  });
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.send("stop");
  await exited;
}

async function measure(target: Target): Promise<Measurement> {
  const { server, agent, call, close } = await start(target);
  try {
    let recording = false;
    let stopped = false;
    const latencies: number[] = [];
    const worker = async () => {
      while (!stopped) {
        const started = performance.now();
        const text = await call();
        if (text !== TEXT) throw new Error(`bad answer: ${String(text).slice(0, 300)}`);
        if (recording && !stopped) latencies.push(performance.now() - started);
      }
    };
    const running = Array.from({ length: CONCURRENCY }, worker);
    await sleep(WARMUP_MS);
    const cpuOf = (child: ChildProcess | undefined) => (child?.pid ? cpuSecondsOf(child.pid) : 0);
    const cpuBefore = cpuOf(server);
    const agentCpuBefore = cpuOf(agent);
    recording = true;
    const started = performance.now();
    await sleep(MEASURE_MS);
    stopped = true;
    const elapsed = performance.now() - started;
    const cpuAfter = cpuOf(server);
    const agentCpuAfter = cpuOf(agent);
    await Promise.all(running);
    latencies.sort((a, b) => a - b);
    const percentile = (p: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
    return {
      rps: (latencies.length / elapsed) * 1000,
      p50: percentile(0.5),
      p99: percentile(0.99),
      cpuMicrosPerCall: ((cpuAfter - cpuBefore) * 1e6) / latencies.length,
      ...(agent && { agentCpuMicrosPerCall: ((agentCpuAfter - agentCpuBefore) * 1e6) / latencies.length }),
    };
  } finally {
    await close();
    if (agent) {
      await stopServer(agent);
      await stopServer(server);
    } else {
      await stopChild(server);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function main(): Promise<void> {
  const label: Record<Target, string> = {
    "a2a-echo": "A2A SDK echo server, direct (express + DefaultRequestHandler)",
    bridge: "gateway A2A bridge → ACP agent (signed, persisted, audited)",
    acp: "ACP agent → gateway → ACP agent, WebSocket (the bridge's ACP half)",
  };
  console.log(
    `A2A SendMessage over JSON-RPC/HTTP (127.0.0.1), the A2A SDK client, ${CONCURRENCY} concurrent callers, ` +
      `${MEASURE_MS / 1000} s per run, median of ${ROUNDS} rounds (order alternates)\n` +
      "server CPU: the gateway's process vs the echo server's; the target ACP agent runs in its own process\n",
  );
  const results: Record<Target, Measurement[]> = { "a2a-echo": [], bridge: [], acp: [] };
  const targets = (["a2a-echo", "bridge", "acp"] as const).filter((target) => ONLY.includes(target));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) results[target].push(await measure(target));
  }
  // Medians, each figure on its own: on a shared machine one slow round must not decide the result.
  const median = (target: Target, figure: (m: Measurement) => number | undefined) => {
    const values = results[target].map(figure).filter((v) => v !== undefined);
    values.sort((a, b) => a - b);
    const mid = values.length / 2;
    if (values.length === 0) return undefined;
    return values.length % 2 === 1
      ? (values[Math.floor(mid)] ?? 0)
      : ((values[mid - 1] ?? 0) + (values[mid] ?? 0)) / 2;
  };
  const summary = (target: Target): Measurement => ({
    rps: median(target, (m) => m.rps) ?? 0,
    p50: median(target, (m) => m.p50) ?? 0,
    p99: median(target, (m) => m.p99) ?? 0,
    cpuMicrosPerCall: median(target, (m) => m.cpuMicrosPerCall) ?? 0,
    ...(target !== "a2a-echo" && { agentCpuMicrosPerCall: median(target, (m) => m.agentCpuMicrosPerCall) }),
  });
  const rows = [
    ["server", "round trips/s", "p50 ms", "p99 ms", "server CPU µs/call", "ACP agent CPU µs/call"],
  ];
  for (const target of targets) {
    const m = summary(target);
    rows.push([
      label[target],
      Math.round(m.rps).toLocaleString("en-US"),
      m.p50.toFixed(1),
      m.p99.toFixed(1),
      Math.round(m.cpuMicrosPerCall).toString(),
      m.agentCpuMicrosPerCall === undefined ? "-" : Math.round(m.agentCpuMicrosPerCall).toString(),
    ]);
  }
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  for (const row of rows) {
    console.log(
      row.map((cell, i) => (i >= 1 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join("  "),
    );
  }
  const has = (target: Target) => targets.includes(target as never);
  if (has("a2a-echo") && has("bridge")) {
    const direct = summary("a2a-echo");
    const bridged = summary("bridge");
    console.log(
      `\nbridge vs direct: ${(bridged.rps / direct.rps).toFixed(2)}× the round trips/s, ` +
        `${(bridged.cpuMicrosPerCall / direct.cpuMicrosPerCall).toFixed(2)}× the server CPU per call ` +
        "(target: cost ≤ 2×)",
    );
    if (has("acp")) {
      const acpHalf = summary("acp").cpuMicrosPerCall;
      const a2aHalf = bridged.cpuMicrosPerCall - acpHalf;
      console.log(
        `the bridge's ACP half (two signed messages relayed): ${Math.round(acpHalf)} µs, ` +
          `${(acpHalf / direct.cpuMicrosPerCall).toFixed(2)}× the echo; its A2A half (HTTP, the SDK's task ` +
          `lifecycle, task records, the bridge agent): ${Math.round(a2aHalf)} µs, ` +
          `${(a2aHalf / direct.cpuMicrosPerCall).toFixed(2)}× the echo`,
      );
    }
  }
  if (PROFILE_DIR) {
    const { areas, functions } = hotSpots(PROFILE_DIR, fileURLToPath(new URL("../..", import.meta.url)), 20);
    console.log("\ngateway process, self time by area:");
    for (const a of areas) console.log(`  ${a.selfPercent.toFixed(1).padStart(5)}%  ${a.area}`);
    console.log("hottest functions:");
    for (const f of functions)
      console.log(`  ${f.selfPercent.toFixed(1).padStart(5)}%  ${f.function} ${f.location}`);
    rmSync(PROFILE_DIR, { recursive: true, force: true });
  }
}

if (ROLE === "gateway") await serveGateway();
else if (ROLE === "agent") await serveAgent();
else await main();
