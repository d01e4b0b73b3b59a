/**
 * `npm run bench -- scale`: many connected agents on one gateway. N agents (default
 * 5,000) are registered in pairs, each pair handshaken through the gateway, and each agent holds
 * its own WebSocket. Measured: the gateway's RSS per idle connected agent (the gateway is restarted
 * on the same data after the handshakes; RSS with all N connected and idle, minus RSS before they
 * connected, over N, each read after a full garbage collection), then each agent sends one signed
 * request per second to its peer (open loop, spread evenly over the second) and the peer
 * acknowledges it: the delivery rate and latency (submit sent → `new_message` received by the
 * peer, p50/p99).
 *
 * Configurations: the embedded broker (one gateway); NATS with one gateway; NATS with two gateways
 * sharing the agents (agent i on gateway i mod 2, so every message crosses from one to the other).
 *
 * Env: BENCH_SCALE_AGENTS (default 5000, even), BENCH_SCALE_RATE (messages/s per agent, default 1),
 * BENCH_SECONDS (timed window, default 10), BENCH_WARMUP_SECONDS (default 3), BENCH_ONLY (comma
 * list of embedded, nats, nats-2), BENCH_GATEWAY_PROFILE=1 (gateways under --cpu-prof, profiles in
 * bench/results/scale-profile-<configuration>/). JSON goes to bench/results/scale.json.
 */

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { requestBody } from "../gateway/acp-agents.js";
import { percentile, sleep } from "../gateway/load.js";
import {
  collectGarbage,
  cpuSecondsOf,
  findNatsServer,
  type GatewayProcess,
  runQueueWaitNsOf,
  spawnGateway,
  startNatsServer,
  stopChild,
} from "../gateway/processes.js";
import { Fleet, fleetAgentId, handshakePairs, registerFleet } from "./fleet.js";

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const AGENTS = Math.max(2, Math.floor(env("BENCH_SCALE_AGENTS", 5000) / 2) * 2);
const RATE = env("BENCH_SCALE_RATE", 1);
const SECONDS = env("BENCH_SECONDS", 10);
const WARMUP_SECONDS = env("BENCH_WARMUP_SECONDS", 3);
const PROFILE = process.env.BENCH_GATEWAY_PROFILE === "1";
const ONLY = new Set((process.env.BENCH_ONLY ?? "embedded,nats,nats-2").split(",").map((s) => s.trim()));
/** About the size of a short conversational request. */
const ENVELOPE_BYTES = 512;

const here = dirname(fileURLToPath(import.meta.url));
const resultsDir = join(here, "../../../bench/results");

interface Configuration {
  key: string;
  label: string;
  broker: "embedded" | "nats";
  gateways: number;
}

interface ScaleResult {
  key: string;
  configuration: string;
  agents: number;
  gateways: number;
  setupSeconds: { register: number; handshake: number; connect: number; queuedDelivered: number };
  rssIdleMb: number[];
  rssPerIdleAgentKb: number;
  offeredPerSecond: number;
  deliveredPerSecond: number;
  skipped: number;
  undelivered: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
  cpuPercent: Record<string, number>;
  /** This process's event-loop delay p99 in the window: high means the latency is partly ours. */
  clientLoopDelayP99Ms: number;
  /** Share of the window each gateway's event loop was runnable but not running (another process had the CPU). */
  gatewayRunQueueWaitPercent: number[];
}

function rssKbOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
}

function progress(text: string): void {
  process.stdout.write(`  ${text}\n`);
}

async function timed<T>(what: string, task: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const value = await task();
  const seconds = (performance.now() - started) / 1000;
  progress(`${what}: ${seconds.toFixed(1)} s`);
  return [value, seconds];
}

/** Waits until every agent has received the handshake's two messages from its peer, or fails. */
async function untilHandshakesDelivered(fleet: Fleet): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (fleet.received.some((n) => n < 2)) {
    if (Date.now() > deadline) {
      const missing = fleet.received.flatMap((n, i) => (n < 2 ? [fleetAgentId(i)] : []));
      throw new Error(
        `${missing.length} agents did not receive their two handshake messages within 120 s of connecting: ` +
          `${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ", …" : ""}`,
      );
    }
    await sleep(200);
  }
}

/** Open loop: the sends of all agents spread evenly, each agent `RATE` times a second. */
async function drive(fleet: Fleet, seconds: number, onTick?: (elapsed: number) => void): Promise<void> {
  const perMs = (AGENTS * RATE) / 1000;
  const started = performance.now();
  let sent = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const elapsed = performance.now() - started;
      const due = Math.floor(Math.min(elapsed, seconds * 1000) * perMs);
      for (; sent < due; sent++) fleet.send(sent % AGENTS);
      onTick?.(elapsed);
      if (elapsed >= seconds * 1000) {
        clearInterval(timer);
        resolve();
      }
    }, 5);
  });
}

async function measure(config: Configuration): Promise<ScaleResult> {
  console.log(`\n${config.label}: ${AGENTS.toLocaleString("en-US")} agents, ${RATE} msg/s each`);
  const scratch = mkdtempSync(join(tmpdir(), `acp-bench-scale-${config.key}-`));
  let nats: Awaited<ReturnType<typeof startNatsServer>> | undefined;
  const gateways: GatewayProcess[] = [];
  try {
    if (config.broker === "nats") {
      const binary = findNatsServer();
      if (!binary) throw new Error("nats-server is not installed (apt-get install nats-server)");
      nats = await startNatsServer(binary, join(scratch, "nats"));
    }
    const startGateways = async (profile: boolean) => {
      for (let g = 0; g < config.gateways; g++) {
        const profileDir = profile ? join(resultsDir, `scale-profile-${config.key}`) : undefined;
        if (profileDir && g === 0) rmSync(profileDir, { recursive: true, force: true });
        gateways.push(
          await spawnGateway({
            dataDir: join(scratch, `data-${g}`),
            ...(nats ? { natsUrl: nats.url } : {}),
            ...(profileDir ? { profileDir } : {}),
            collectGarbageOnSignal: true,
          }),
        );
      }
    };
    await startGateways(false);
    const [agents, register] = await timed("register", () => registerFleet(gateways[0]!.url, AGENTS));
    const [, handshake] = await timed("handshake every pair", () => handshakePairs(gateways[0]!.url, agents));
    // Restarted on the same data, so the "before" RSS is a fresh process's and not the high-water
    // mark of registering and handshaking (V8 keeps pages it grew into even after collecting them).
    for (const g of gateways.splice(0)) await stopChild(g.child);
    await timed("restart the gateways on the same data", () => startGateways(PROFILE));
    await sleep(1000);
    await Promise.all(gateways.map(collectGarbage));
    const rssBefore = gateways.map((g) => rssKbOf(g.child.pid ?? 0));
    const body = requestBody(agents[0]!, agents[1]!.sender.agentId, ENVELOPE_BYTES);
    const [fleet, connect] = await timed("connect every agent", () =>
      Fleet.connect(
        agents,
        gateways.map((g) => g.wsUrl),
        body,
      ),
    );
    const [, queuedDelivered] = await timed("deliver the handshakes queued before connecting", () =>
      untilHandshakesDelivered(fleet),
    );
    await sleep(2000);
    await Promise.all(gateways.map(collectGarbage));
    const rssIdle = gateways.map((g) => rssKbOf(g.child.pid ?? 0));
    const rssPerIdleAgentKb = rssIdle.reduce((sum, kb, g) => sum + kb - (rssBefore[g] ?? 0), 0) / AGENTS;
    progress(`idle: RSS ${rssIdle.map((kb) => `${Math.round(kb / 1024)} MB`).join(" + ")}`);

    await drive(fleet, WARMUP_SECONDS);
    const watch: Record<string, number> = Object.fromEntries(
      gateways.map((g, i) => [config.gateways > 1 ? `gateway${i + 1}` : "gateway", g.child.pid ?? 0]),
    );
    if (nats) watch.nats = nats.child.pid ?? 0;
    const cpuBefore = Object.fromEntries(Object.entries(watch).map(([k, pid]) => [k, cpuSecondsOf(pid)]));
    const clientBefore = process.cpuUsage();
    const waitBefore = gateways.map((g) => runQueueWaitNsOf(g.child.pid ?? 0));
    const sentBefore = fleet.sent;
    const skippedBefore = fleet.skipped;
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    fleet.startMeasuring();
    const started = performance.now();
    await drive(fleet, SECONDS);
    fleet.stopMeasuring();
    loopDelay.disable();
    const window = (performance.now() - started) / 1000;
    const cpuPercent: Record<string, number> = {};
    for (const [name, pid] of Object.entries(watch))
      cpuPercent[name] = Math.round(((cpuSecondsOf(pid) - (cpuBefore[name] ?? 0)) / window) * 100);
    const client = process.cpuUsage(clientBefore);
    const gatewayRunQueueWaitPercent = gateways.map((g, i) =>
      Math.round(((runQueueWaitNsOf(g.child.pid ?? 0) - (waitBefore[i] ?? 0)) / 1e9 / window) * 100),
    );
    cpuPercent.client = Math.round(((client.user + client.system) / 1e6 / window) * 100);
    const sent = fleet.sent - sentBefore;
    // Let what was sent in the window arrive (a backlogged gateway may need a while).
    const drainDeadline = Date.now() + 30_000;
    while (fleet.undelivered > 0 && Date.now() < drainDeadline) await sleep(100);
    const sorted = fleet.sortedLatencies();
    const result: ScaleResult = {
      key: config.key,
      configuration: config.label,
      agents: AGENTS,
      gateways: config.gateways,
      setupSeconds: { register, handshake, connect, queuedDelivered },
      rssIdleMb: rssIdle.map((kb) => Math.round(kb / 1024)),
      rssPerIdleAgentKb: Math.round(rssPerIdleAgentKb * 10) / 10,
      offeredPerSecond: AGENTS * RATE,
      deliveredPerSecond: Math.round(sorted.length / window),
      skipped: fleet.skipped - skippedBefore,
      undelivered: fleet.undelivered,
      errors: fleet.errors,
      p50Ms: sorted.length > 0 ? Number(percentile(sorted, 50).toFixed(2)) : Number.NaN,
      p99Ms: sorted.length > 0 ? Number(percentile(sorted, 99).toFixed(2)) : Number.NaN,
      cpuPercent,
      clientLoopDelayP99Ms: Math.round(loopDelay.percentile(99) / 1e6),
      gatewayRunQueueWaitPercent,
    };
    progress(
      `sent ${sent.toLocaleString("en-US")} in ${window.toFixed(1)} s, delivered ${sorted.length.toLocaleString("en-US")}` +
        (fleet.errors > 0 ? `; ${fleet.errors} errors (last: ${fleet.lastError})` : ""),
    );
    fleet.close();
    return result;
  } finally {
    for (const g of gateways) await stopChild(g.child);
    if (nats) await stopChild(nats.child);
    rmSync(scratch, { recursive: true, force: true });
  }
}

const CONFIGURATIONS: Configuration[] = [
  { key: "embedded", label: "one gateway, embedded broker", broker: "embedded", gateways: 1 },
  { key: "nats", label: "one gateway, NATS", broker: "nats", gateways: 1 },
  { key: "nats-2", label: "two gateways, one NATS", broker: "nats", gateways: 2 },
];

console.log(
  `scale: ${AGENTS.toLocaleString("en-US")} WebSocket agents in handshaken pairs, ${RATE} msg/s each ` +
    `(~${ENVELOPE_BYTES} B signed requests), ${WARMUP_SECONDS} s warm-up + ${SECONDS} s timed; ` +
    `${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, node ${process.version}`,
);
const results: ScaleResult[] = [];
for (const config of CONFIGURATIONS) if (ONLY.has(config.key)) results.push(await measure(config));

const header =
  "configuration                   RSS idle MB  KB/idle agent  offered/s  delivered/s  p50 ms  p99 ms  skipped  undelivered  client loop p99 ms  gateway waiting for CPU %  CPU % (client, gateway[s], nats)";
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "-");
console.log(`\n${header}\n${"-".repeat(header.length)}`);
for (const r of results) {
  const { client, ...servers } = r.cpuPercent;
  console.log(
    [
      r.configuration.padEnd(30),
      r.rssIdleMb.join("+").padStart(11),
      r.rssPerIdleAgentKb.toFixed(1).padStart(13),
      r.offeredPerSecond.toLocaleString("en-US").padStart(9),
      r.deliveredPerSecond.toLocaleString("en-US").padStart(11),
      ms(r.p50Ms).padStart(6),
      ms(r.p99Ms).padStart(6),
      r.skipped.toLocaleString("en-US").padStart(7),
      r.undelivered.toLocaleString("en-US").padStart(11),
      String(r.clientLoopDelayP99Ms).padStart(17),
      r.gatewayRunQueueWaitPercent.join("+").padStart(24),
      ` ${client}, ${Object.values(servers).join(", ")}`,
    ].join("  "),
  );
}
console.log(
  "\nKB/idle agent = (gateway RSS with every agent connected and idle − RSS before they connected, each read after a full garbage collection in the gateway) / agents, " +
    "summed over the gateways. Latency = submit sent → new_message received by the peer, over the messages " +
    "sent in the window and delivered within 30 s after it. skipped = sends not made because that agent " +
    "already had 8 submits unanswered; undelivered = sent in the window, not delivered 30 s after it " +
    "(both mean the gateway could not keep up with the offered rate). client loop p99 = this " +
    "process's event-loop delay: when it is large, part of the latency is the load generator's. gateway waiting for CPU = share of the window the " +
    "gateway's event loop was runnable but another process had the CPU (/proc/<pid>/schedstat).",
);
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  join(resultsDir, "scale.json"),
  `${JSON.stringify(
    {
      benchmark: "scale",
      date: new Date().toISOString(),
      machine: {
        cpus: cpus().length,
        cpuModel: cpus()[0]?.model,
        node: process.version,
        loadAverage: loadavg(),
      },
      settings: { agents: AGENTS, ratePerAgent: RATE, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS },
      results,
    },
    null,
    2,
  )}\n`,
);
console.log("JSON: bench/results/scale.json");
