/**
 * Soak: the gateway (`acp gateway`, its own process) under a steady load for a long time, with
 * recipients connecting and disconnecting all along. Every interval it reports throughput, latency
 * p50/p99 and the gateway's RSS; at the end it checks that nothing acknowledged was lost and that
 * memory stayed within the stated bound, and draws docs/img/soak.png.
 *
 *   npm run bench -- soak                                   # 30 minutes, 200 msgs/s
 *   SOAK_MINUTES=3 npm run bench -- soak                    # the shortened run docs/reliability.md shows
 *   SOAK_RATE=400 SOAK_PAIRS=20 SOAK_BROKER=nats npm run bench -- soak
 *
 * After a warm-up (SOAK_WARMUP_SECONDS, default 10: traffic runs, nothing is recorded), one sample
 * per SOAK_INTERVAL_SECONDS. Bound (SOAK_RSS_BOUND_MB, default 400): the gateway's RSS never exceeds
 * it, and after the first 10 % of the samples it grows by less than SOAK_RSS_GROWTH_MB (default 64).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BenchAgent, handshake, registerAgent } from "../gateway/acp-agents.js";
import { HttpPoster } from "../gateway/http-post.js";
import { percentile } from "../gateway/load.js";
import {
  cpuSecondsOf,
  findNatsServer,
  spawnGateway,
  startNatsServer,
  stopChild,
} from "../gateway/processes.js";
import { renderSvg, type Sample, writeChart } from "./chart.js";
import { SoakRecipient, SteadySender, sleep } from "./traffic.js";

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const MINUTES = env("SOAK_MINUTES", 30);
const RATE = env("SOAK_RATE", 200);
const PAIRS = env("SOAK_PAIRS", 10);
const INTERVAL_S = env("SOAK_INTERVAL_SECONDS", MINUTES <= 5 ? 5 : 15);
const WARMUP_S = env("SOAK_WARMUP_SECONDS", 10);
const RSS_BOUND_MB = env("SOAK_RSS_BOUND_MB", 400);
const RSS_GROWTH_MB = env("SOAK_RSS_GROWTH_MB", 64);
const BROKER = process.env.SOAK_BROKER === "nats" ? "nats" : "embedded";

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The gateway's resident memory now, MB (Linux /proc). */
function rssMbOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Math.round(Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN) / 1024);
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), "acp-soak-"));
  const nats = BROKER === "nats" ? await startNats(work) : undefined;
  const gateway = await spawnGateway({ dataDir: join(work, "data"), ...(nats ? { natsUrl: nats.url } : {}) });
  const pid = gateway.child.pid as number;
  console.log(
    `soak: ${MINUTES} min at ${RATE} msgs/s over ${PAIRS} pairs (${BROKER} broker), half the recipients churning; gateway pid ${pid}`,
  );

  const latencies: number[] = [];
  const delivered = new Map<string, number>();
  let deliveredInInterval = 0;
  const onDelivery = (id: string, sentAt: number, steady: boolean) => {
    delivered.set(id, (delivered.get(id) ?? 0) + 1);
    deliveredInInterval++;
    if (steady && Number.isFinite(sentAt)) latencies.push(Date.now() - sentAt);
  };
  const pairs: Array<{ from: BenchAgent; to: SoakRecipient }> = [];
  for (let i = 0; i < PAIRS; i++) {
    const from = await registerAgent(gateway.url, `soak-sender-${i}`);
    const agent = await registerAgent(gateway.url, `soak-recipient-${i}`);
    await handshake(gateway.url, from, agent);
    const to = new SoakRecipient(gateway.wsUrl, agent, i % 2 === 0, onDelivery);
    await to.connect();
    pairs.push({ from, to });
  }
  await sleep(1_000);
  delivered.clear(); // the handshake's messages
  deliveredInInterval = 0;

  const poster = new HttpPoster(gateway.url, 256);
  const sender = new SteadySender(poster, pairs, RATE);
  const churning = pairs.filter((p) => !p.to.steady).map((p) => p.to.churn());
  sender.start();
  // JIT and first connections: traffic runs, nothing is recorded yet.
  await sleep(WARMUP_S * 1000);
  latencies.length = 0;
  deliveredInInterval = 0;
  const started = Date.now();

  const samples: Sample[] = [];
  let cpuBefore = cpuSecondsOf(pid);
  console.log("  min   msgs/s   p50 ms   p99 ms   RSS MB   CPU %");
  while (Date.now() - started < MINUTES * 60_000) {
    await sleep(INTERVAL_S * 1000);
    const sorted = Float64Array.from(latencies.splice(0)).sort();
    const cpuNow = cpuSecondsOf(pid);
    const sample: Sample = {
      minute: (Date.now() - started) / 60_000,
      msgsPerSecond: deliveredInInterval / INTERVAL_S,
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      rssMb: rssMbOf(pid),
    };
    const cpu = ((cpuNow - cpuBefore) / INTERVAL_S) * 100;
    cpuBefore = cpuNow;
    deliveredInInterval = 0;
    samples.push(sample);
    console.log(
      `${sample.minute.toFixed(1).padStart(5)} ${sample.msgsPerSecond.toFixed(0).padStart(8)} ${sample.p50Ms.toFixed(1).padStart(8)} ${sample.p99Ms.toFixed(1).padStart(8)} ${String(sample.rssMb).padStart(8)} ${cpu.toFixed(0).padStart(7)}`,
    );
  }

  await sender.stop();
  await Promise.all(pairs.map((p) => p.to.stop()));
  await Promise.all(churning);
  const acknowledged = [...sender.stats.acknowledged.keys()];
  for (let i = 0; i < 600 && acknowledged.some((id) => !delivered.has(id)); i++) await sleep(100);
  const lost = acknowledged.filter((id) => !delivered.has(id)).length;
  const redelivered = [...delivered.values()].filter((n) => n > 1).length;

  const warmup = Math.max(1, Math.ceil(samples.length / 10));
  const baseline = samples[warmup - 1]?.rssMb ?? Number.NaN;
  const peak = Math.max(...samples.map((s) => s.rssMb));
  const growth = Math.max(...samples.slice(warmup).map((s) => s.rssMb), baseline) - baseline;
  const memoryOk = peak <= RSS_BOUND_MB && growth < RSS_GROWTH_MB;
  const reconnects = pairs.reduce((n, p) => n + p.to.reconnects, 0);
  const seconds = (Date.now() - started) / 1000;
  const summary = {
    benchmark: "soak",
    date: new Date().toISOString(),
    settings: { minutes: MINUTES, rate: RATE, pairs: PAIRS, intervalSeconds: INTERVAL_S, broker: BROKER },
    submitted: sender.stats.submitted,
    acknowledged: acknowledged.length,
    refused: Object.fromEntries(sender.stats.refused),
    behindSchedule: sender.stats.behindSchedule,
    delivered: delivered.size,
    lost,
    redeliveredOnTheWire: redelivered,
    recipientReconnects: reconnects,
    averageMsgsPerSecond: Math.round(delivered.size / seconds),
    worstP99Ms: Math.max(...samples.map((s) => s.p99Ms).filter(Number.isFinite)),
    rss: {
      baselineMb: baseline,
      peakMb: peak,
      growthAfterWarmupMb: growth,
      boundMb: RSS_BOUND_MB,
      growthBoundMb: RSS_GROWTH_MB,
    },
    pass: lost === 0 && memoryOk,
    samples,
  };
  mkdirSync(join(repoRoot, "bench/results"), { recursive: true });
  writeFileSync(join(repoRoot, "bench/results/soak.json"), `${JSON.stringify(summary, null, 2)}\n`);
  mkdirSync(join(repoRoot, "docs/img"), { recursive: true });
  const title = `acp gateway soak: ${MINUTES} min, ${RATE} msgs/s, ${PAIRS} pairs, ${BROKER} broker, ${reconnects} reconnects`;
  const madeBy = writeChart(
    renderSvg(samples, title, RSS_BOUND_MB),
    join(work, "soak.svg"),
    join(repoRoot, "docs/img/soak.png"),
  );

  console.log(`
submitted ${summary.submitted}, acknowledged ${summary.acknowledged}, delivered ${summary.delivered}, lost ${lost}
refused ${JSON.stringify(summary.refused)}, behind schedule ${summary.behindSchedule} ticks, redelivered on the wire ${redelivered}, recipient reconnects ${reconnects}
throughput ${summary.averageMsgsPerSecond} msgs/s average, worst interval p99 ${summary.worstP99Ms.toFixed(1)} ms
RSS baseline ${baseline} MB, peak ${peak} MB (bound ${RSS_BOUND_MB}), growth after warm-up ${growth} MB (bound ${RSS_GROWTH_MB}): ${memoryOk ? "within bound" : "OVER BOUND"}
plot: docs/img/soak.png (${madeBy}); results: bench/results/soak.json
${summary.pass ? "PASS" : "FAIL"}`);

  poster.close();
  await Promise.all(pairs.map((p) => p.to.disconnect()));
  await stopChild(gateway.child);
  if (nats) await stopChild(nats.child);
  rmSync(work, { recursive: true, force: true });
  process.exitCode = summary.pass ? 0 : 1;
}

async function startNats(work: string) {
  const binary = findNatsServer();
  if (!binary) throw new Error("SOAK_BROKER=nats needs nats-server (apt-get install nats-server)");
  const store = join(work, "nats");
  mkdirSync(store);
  return startNatsServer(binary, store);
}

await main();
