/**
 * `npm run bench -- orchestration`: scatter-gather of one AgentCommand to each of 16 remote agents
 * through a real gateway, the orchestrator (`Orchestrator.scatterGather`: validation, permission
 * check, audit entry per command and response, circuit breaker, concurrency limit, timeout, response
 * validation) against the bare SDK (`Promise.all` of 16 `AcpAgent.request(…, {method:
 * "agent.command"})` with the same bodies) in the same run, blocks alternating so drift hits both.
 * Three processes: the gateway (embedded broker), the 16 agents (one SDK agent each, answering with
 * `serveCommands`), and this one (the orchestrator's SDK agent and the load).
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { AcpAgent } from "../../src/client/index.js";
import { startDefaultGateway } from "../../src/server.js";
import {
  type AgentCommand,
  AuditLogCommandSink,
  aggregators,
  COMMAND_METHOD,
  Orchestrator,
  serveCommands,
} from "../../src/orchestration/index.js";
import { generateIdentity, type PrivateIdentity, publicIdentity } from "../../src/protocol/index.js";

const AGENTS = 16;
const CONCURRENT_SCATTERS = 4;
const BLOCK_MS = 2_000;
const BLOCKS = 5;
const WARMUP_MS = 2_000;
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";

interface Credentials {
  identity: PrivateIdentity;
  apiKey: string;
}

// ---- child processes ----

async function serveGateway(data: string): Promise<void> {
  const gateway = await startDefaultGateway({
    port: 0,
    data,
    adminToken: ADMIN_TOKEN,
    logger: pino({ level: "silent" }),
    limits: { ratePerSecond: 1_000_000, burst: 1_000_000 },
  });
  process.on("message", (message) => {
    if (message === "stop") void gateway.close().then(() => process.exit(0));
  });
  process.send?.({ url: gateway.url });
}

async function serveAgents(url: string, agents: Credentials[], root: string): Promise<void> {
  const connected = await Promise.all(
    agents.map(async ({ identity, apiKey }) => {
      const agent = new AcpAgent({
        gateway: url,
        identity,
        apiKey,
        audit: { root: join(root, "agents-audit") },
        state: false,
      });
      serveCommands(agent, (command) => ({
        data: { analyzed: command.parameters.file, by: identity.agentId },
      }));
      await agent.connect();
      return agent;
    }),
  );
  process.on("message", (message) => {
    if (message === "stop") void Promise.all(connected.map((a) => a.close())).then(() => process.exit(0));
  });
  process.send?.({ ready: true });
}

// ---- load (this process) ----

function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    child.once("message", (message) => resolve(message as T));
    child.once("exit", (code) => reject(new Error(`child exited with code ${code}`)));
  });
}

async function register(url: string, agentId: string): Promise<Credentials> {
  const identity = generateIdentity(agentId, `principal-of-${agentId}`);
  const res = await fetch(`${url}/api/v1/agents`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(publicIdentity(identity)),
  });
  if (res.status !== 201) throw new Error(`register ${agentId}: ${res.status} ${await res.text()}`);
  return { identity, apiKey: ((await res.json()) as { apiKey: string }).apiKey };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)] ?? 0;

interface Tally {
  latencies: number[];
  elapsedMs: number;
  /** CPU time of this process (the orchestrator side) while the path ran, µs. */
  cpuMicros: number;
}

/** `CONCURRENT_SCATTERS` loops each doing one 16-way scatter after another, for `ms`. */
async function run(scatter: () => Promise<void>, ms: number, tally?: Tally): Promise<void> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const deadline = started + ms;
  const loop = async () => {
    while (performance.now() < deadline) {
      const t = performance.now();
      await scatter();
      tally?.latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT_SCATTERS }, loop));
  if (tally) {
    tally.elapsedMs += performance.now() - started;
    const used = process.cpuUsage(cpu);
    tally.cpuMicros += used.user + used.system;
  }
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "acp-bench-orch-"));
  const self = fileURLToPath(import.meta.url);
  const gatewayChild = fork(self, ["gateway", join(root, "gateway")], { stdio: "inherit" });
  let agentsChild: ChildProcess | undefined;
  let client: AcpAgent | undefined;
  try {
    const { url } = await nextMessage<{ url: string }>(gatewayChild);
    const ids = Array.from({ length: AGENTS }, (_, i) => `analyzer-${String(i + 1).padStart(2, "0")}`);
    const workers = await Promise.all(ids.map((id) => register(url, id)));
    const me = await register(url, "bench-orchestrator");
    agentsChild = fork(self, ["agents", url, root], { stdio: "inherit" });
    agentsChild.send(workers);
    await nextMessage(agentsChild);

    client = new AcpAgent({ gateway: url, ...me, audit: { root: join(root, "audit") }, state: false });
    await client.connect();
    for (const id of ids) await client.handshake(id);
    const sink = await AuditLogCommandSink.open({
      agent: "bench-orchestrator-commands",
      root: join(root, "audit"),
    });
    const sdk = client;
    /** The audited orchestrator (the default), and one with `audit: false` to show what the command log costs. */
    const makeOrchestrator = (audit: AuditLogCommandSink | false) => {
      const orch = new Orchestrator({
        id: "bench-orchestrator",
        audit,
        config: {
          security: { approval_threshold: "none" },
          performance: { max_parallel: AGENTS * CONCURRENT_SCATTERS, enable_caching: false },
        },
      });
      for (const id of ids) orch.addAgent({ id, remote: sdk, permissions: ["code:read"] });
      return orch;
    };
    const audited = makeOrchestrator(sink);
    const unaudited = makeOrchestrator(false);

    const drafts = ids.map((to) => ({
      to,
      action: "ANALYZE" as const,
      parameters: { file: "src/main.ts" },
      security: { permissions: ["code:read"] },
    }));
    const via = (orch: Orchestrator) => async () => {
      const result = await orch.scatterGather(drafts, { aggregate: aggregators.collect, deadlineMs: 10_000 });
      if (result.status !== "success")
        throw new Error(`scatter failed: ${JSON.stringify(result.outcomes.map((o) => o.response.error))}`);
    };
    // The same command bodies, each with a fresh id, straight through the SDK.
    const bareCommand = (to: string): AgentCommand => ({
      id: randomUUID(),
      timestamp: new Date().toISOString(),
      version: "2.0",
      from: "bench-orchestrator",
      to,
      priority: "medium",
      action: "ANALYZE",
      parameters: { file: "src/main.ts" },
      security: { permissions: ["code:read"] },
    });
    const viaSdk = async () => {
      const answers = await Promise.all(
        ids.map((to) => sdk.request(to, bareCommand(to), { method: COMMAND_METHOD, timeoutMs: 10_000 })),
      );
      if (answers.some((a) => a.status !== "success")) throw new Error("bare request failed");
    };

    console.log(
      `scatter-gather of 1 AgentCommand to each of ${AGENTS} remote agents through a gateway child process (embedded broker), ` +
        `${CONCURRENT_SCATTERS} scatters in flight, ${BLOCKS} alternating blocks of ${BLOCK_MS / 1000} s per path\n`,
    );
    const paths = [
      { label: "bare SDK (Promise.all of requests)", scatter: viaSdk },
      { label: "Orchestrator.scatterGather", scatter: via(audited) },
      { label: "Orchestrator.scatterGather, audit: false", scatter: via(unaudited) },
    ].map((path) => ({ ...path, tally: { latencies: [], elapsedMs: 0, cpuMicros: 0 } as Tally }));
    for (const path of paths) await run(path.scatter, WARMUP_MS / paths.length);
    for (let block = 0; block < BLOCKS; block++) {
      for (const path of paths) await run(path.scatter, BLOCK_MS, path.tally);
    }
    const stats = (tally: Tally) => {
      const sorted = [...tally.latencies].sort((a, b) => a - b);
      return {
        commandsPerSecond: (tally.latencies.length * AGENTS * 1000) / tally.elapsedMs,
        mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
        p50: percentile(sorted, 0.5),
        p99: percentile(sorted, 0.99),
        scatters: sorted.length,
        cpuPerCommand: tally.cpuMicros / (sorted.length * AGENTS),
      };
    };
    const results = paths.map((path) => ({ label: path.label, ...stats(path.tally) }));
    const rows = [
      ["path", "commands/s", "scatters", "mean ms", "p50 ms", "p99 ms", "client CPU µs/command"],
      ...results.map((s) => [
        s.label,
        Math.round(s.commandsPerSecond).toLocaleString("en-US"),
        String(s.scatters),
        s.mean.toFixed(1),
        s.p50.toFixed(1),
        s.p99.toFixed(1),
        Math.round(s.cpuPerCommand).toString(),
      ]),
    ];
    const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
    for (const row of rows)
      console.log(
        row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  "),
      );
    const [bare, ...orchestrated] = results;
    console.log("\norchestrator overhead over the bare SDK, same run (goal: under 10%):");
    for (const o of orchestrated) {
      console.log(
        `  ${o.label}: ${((o.mean / bare!.mean - 1) * 100).toFixed(1)}% mean scatter latency, ` +
          `${((1 - o.commandsPerSecond / bare!.commandsPerSecond) * 100).toFixed(1)}% fewer commands/s, ` +
          `${((o.cpuPerCommand / bare!.cpuPerCommand - 1) * 100).toFixed(1)}% more client CPU per command`,
      );
    }
    await sink.close();
  } finally {
    await client?.close();
    for (const child of [agentsChild, gatewayChild]) {
      if (!child || child.exitCode !== null) continue;
      child.send("stop");
      await new Promise((resolve) => child.once("exit", resolve));
    }
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[2] === "gateway") {
  await serveGateway(process.argv[3]!);
} else if (process.argv[2] === "agents") {
  const agents = await new Promise<Credentials[]>((resolve) =>
    process.once("message", (m) => resolve(m as Credentials[])),
  );
  await serveAgents(process.argv[3]!, agents, process.argv[4]!);
} else {
  await main();
}
