/**
 * `npm run bench -- aged`: a gateway that has run for a week. It builds a store the way a week of
 * traffic would (AGED_MESSAGES messages among 1,000 agents, default 2,000,000; fill.ts says how and
 * what mix), then measures, on that store and on an empty one with the same agents and the same
 * load generator: the relay (msgs/s, p50/p99, and a one-in-flight round trip), `GET /messages` by
 * sender, by recipient and from a cursor deep in the history, status lookups, the dashboard's feed,
 * 7-day volume and message detail (each p50/p99), start → ready, RSS, disk per stored message; then
 * the retention purge of one day's worth of messages while the relay runs (relay p99 during it
 * against without, and the longest the event loop was held), and `acp audit verify` over the
 * week's relay audit. The same on NATS (a `nats-server -js` started here) for what applies.
 *
 * Env: AGED_FILL (`bulk`, the default, or `broker`: fill.ts says what each writes), AGED_MESSAGES (one size or several, comma-separated: `200000,2000000` shows how each query
 * grows with the store), AGED_BROKERS (default `embedded,nats`), AGED_QUERIES (requests per query,
 * default 200), BENCH_SECONDS / BENCH_WARMUP_SECONDS (relay windows, default 10 / 3),
 * AGED_RELAY_WINDOWS (relay windows per store, one after another, the median reported; default 3), AGED_DIR
 * (where the stores are built; default the system's temporary directory; they are removed after),
 * AGED_NATS_PROFILE (a directory: nats-server's CPU profile over each relay window is saved there
 * and summed by function in the output).
 * JSON goes to bench/results/aged.json.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { percentile } from "../gateway/load.js";
import { CLI_PATH } from "../gateway/processes.js";
import type { Manifest } from "./fill.js";
import { BenchGateway } from "./gateway.js";
import {
  measureQueries,
  measureRelay,
  measureRelayWindows,
  measureRoundTrip,
  type RelayWatch,
  relayPair,
} from "./measure.js";
import { measureNats, natsAgedData } from "./nats.js";
import {
  type BrokerFigures,
  type DiskFigures,
  type PurgeFigures,
  printBroker,
  printVerdicts,
  type SizeFigures,
  type StoreFigures,
  verdicts,
} from "./report.js";
import {
  bytesUnder,
  embeddedCounts,
  fillAged,
  lastSeqQueuedBy,
  registerAll,
  waitForFeedIndex,
} from "./stores.js";

const SIZES = (process.env.AGED_MESSAGES ?? "2000000").split(",").map((s) => Number(s.trim()));
const FILL_PATH = (process.env.AGED_FILL ?? "bulk") as "bulk" | "broker";
if (FILL_PATH !== "bulk" && FILL_PATH !== "broker")
  throw new Error(`AGED_FILL is "bulk" or "broker", not "${FILL_PATH}"`);
const BROKERS = new Set((process.env.AGED_BROKERS ?? "embedded,nats").split(",").map((s) => s.trim()));
const DAY_MS = 24 * 3_600_000;
const here = dirname(fileURLToPath(import.meta.url));
const resultsDir = join(here, "../../../bench/results");

function step(text: string): void {
  console.log(`\n— ${text} (load average ${loadavg()[0]?.toFixed(1)})`);
}

/**
 * Writes the page cache's dirty pages to disk before a measurement. A fill, a replay or an audit
 * index has just written gigabytes, and the kernel's writeback of them would otherwise run under
 * the measured relay (a gateway that has run for a week wrote its store over the week).
 */
export function flushDirtyPages(): void {
  const dirtyKb = () => Number(/^Dirty:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0);
  const before = dirtyKb();
  const started = performance.now();
  spawnSync("sync");
  console.log(
    `  flushed ${(before / 1024).toFixed(0)} MB of dirty pages in ${((performance.now() - started) / 1000).toFixed(1)} s before measuring`,
  );
}

/** Everything measured on one running gateway. */
export async function measureStore(
  gateway: BenchGateway,
  manifest: Manifest,
  watch: RelayWatch = {},
): Promise<StoreFigures> {
  // The dashboard's queries are measured once its index has read the relay audit logs to their end.
  const indexMs = await waitForFeedIndex(gateway.data);
  flushDirtyPages();
  const pair = await relayPair(gateway, manifest);
  await gateway.loopDelay(true);
  const { relay, windows } = await measureRelayWindows(gateway, pair, watch);
  const loop = await gateway.loopDelay(true);
  const roundTrip = await measureRoundTrip(gateway, pair);
  const queries = await measureQueries(gateway, manifest);
  return {
    readyMs: gateway.readyMs,
    indexMs,
    relay,
    relayWindows: windows,
    roundTrip,
    queries,
    rssBytes: await gateway.rss(),
    loopDelayMaxMs: loop.maxMs,
  };
}

/** `acp audit verify` (the CLI) over a relay audit root: entries per second. */
export function auditVerify(root: string): BrokerFigures["auditVerify"] {
  const started = performance.now();
  const result = spawnSync(process.execPath, [CLI_PATH, "audit", "verify", "--root", root, "--json"], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  const seconds = (performance.now() - started) / 1000;
  if (result.status !== 0) throw new Error(`acp audit verify failed: ${result.stderr}`);
  const { agents } = JSON.parse(result.stdout) as { agents: { entries: number }[] };
  const entries = agents.reduce((sum, agent) => sum + agent.entries, 0);
  return { entries, seconds, perSecond: entries / seconds };
}

async function measureEmbedded(dir: string, manifest: Manifest): Promise<BrokerFigures> {
  const data = join(dir, "data");
  step("embedded, empty store: the same 1,000 agents, no messages");
  let gateway = await BenchGateway.start({ data: join(dir, "empty") });
  const empty = await measureStore(gateway, await registerAll(gateway, manifest));
  await gateway.stop();

  step("embedded, aged store");
  // The first start indexes the week's relay audit (the fill wrote the logs without it): minutes of
  // writes a gateway that ran for the week did as it went. The store is measured on the next start.
  gateway = await BenchGateway.start({ data });
  const indexMs = await waitForFeedIndex(data);
  await gateway.stop();
  gateway = await BenchGateway.start({ data });
  const aged = { ...(await measureStore(gateway, manifest)), indexMs };
  await gateway.stop();
  const counts = embeddedCounts(data);
  aged.disk = {
    storeBytes: bytesUnder(join(data, "acp.db")) + bytesUnder(join(data, "acp.db-wal")),
    auditBytes: bytesUnder(join(data, "relay-audit")) + bytesUnder(join(data, "relay-audit-index.db")),
    messages: counts.envelopes,
    envelopeMeanBytes: counts.envelopeBytes / counts.envelopes,
  } satisfies DiskFigures;
  return { empty, aged };
}

/** What drops a day of the embedded store: after NATS replayed the whole week from it. */
async function measureEmbeddedPurge(dir: string, manifest: Manifest, figures: BrokerFigures): Promise<void> {
  const data = join(dir, "data");
  step("embedded, retention purge of one day's worth (a 6-day retention) while relaying");
  figures.purge = await measurePurge(data, manifest);
  step("acp audit verify over the week's relay audit");
  figures.auditVerify = auditVerify(join(data, "relay-audit"));
}

/**
 * The retention purge of one day's worth (what a 6-day retention drops of a 7-day store), started
 * when the relay's timed window starts, by the broker's own sweep in the gateway; the window ends
 * when the purge does.
 */
async function measurePurge(data: string, manifest: Manifest): Promise<PurgeFigures> {
  const retentionMs = 6 * DAY_MS;
  const target = lastSeqQueuedBy(data, Date.now() - retentionMs);
  const before = embeddedCounts(data, target).envelopes;
  const gateway = await BenchGateway.start({ data });
  let purge: Promise<unknown> | undefined;
  let swept: { ms: number; batches: number[]; statements: number[] } | undefined;
  let measured: Omit<PurgeFigures, "messages">;
  try {
    await waitForFeedIndex(data);
    flushDirtyPages();
    const pair = await relayPair(gateway, manifest);
    await gateway.loopDelay(true);
    const relay = await measureRelay(gateway, pair, {
      maxMs: 30 * 60_000,
      done: async () => {
        purge ??= gateway.purge(retentionMs).then((result) => {
          swept = result;
        });
        return swept !== undefined;
      },
    });
    const loop = await gateway.loopDelay(true);
    await purge;
    const { ms, batches, statements } = swept as NonNullable<typeof swept>;
    const held = Float64Array.from(batches).sort();
    measured = {
      seconds: ms / 1000,
      relay,
      loopDelayMaxMs: loop.maxMs,
      sweepBatches: {
        count: held.length,
        maxMs: held[held.length - 1] ?? 0,
        p99Ms: percentile(held, 99),
        statementsMaxMs: Math.max(0, ...statements),
      },
      readyMs: gateway.readyMs,
    };
  } finally {
    await gateway.stop();
  }
  return { messages: before - embeddedCounts(data, target).envelopes, ...measured };
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(process.env.AGED_DIR ?? tmpdir(), "acp-bench-aged-"));
  const results: SizeFigures[] = [];
  const machine = { cpus: cpus().length, model: cpus()[0]?.model, loadAverageAtStart: loadavg() };
  try {
    for (const messages of SIZES) {
      const dir = join(root, `week-${messages}`);
      mkdirSync(dir, { recursive: true });
      step(`filling a week of ${messages.toLocaleString("en-US")} messages among 1,000 agents`);
      const manifest = await fillAgedStore(dir, messages);
      // NATS gets the week's relay audit as the fill left it, before the embedded runs add theirs.
      const weekAudit = join(dir, "data", "relay-audit");
      if (BROKERS.has("nats")) cpSync(weekAudit, join(natsAgedData(dir), "relay-audit"), { recursive: true });
      const size: SizeFigures = { messages, fillSeconds: manifest.fillSeconds, brokers: {} };
      if (BROKERS.has("embedded")) size.brokers.embedded = await measureEmbedded(dir, manifest);
      if (BROKERS.has("nats")) size.brokers.nats = await measureNats(dir, manifest, step);
      if (size.brokers.embedded) await measureEmbeddedPurge(dir, manifest, size.brokers.embedded);
      results.push(size);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const goals = verdicts(results);
  console.log(
    `\nfill: ${results.map((r) => `${r.messages.toLocaleString("en-US")} messages in ${r.fillSeconds.toFixed(0)} s`).join("; ")}`,
  );
  for (const size of results)
    for (const [name, figures] of Object.entries(size.brokers))
      if (figures) for (const line of printBroker(name, size.messages, figures)) console.log(line);
  printVerdicts(goals);
  const loadAverageAtEnd = loadavg();
  console.log(
    `\nmachine: ${machine.cpus} × ${machine.model}; load average ${machine.loadAverageAtStart.map((l) => l.toFixed(1)).join(" ")} at the start, ` +
      `${loadAverageAtEnd.map((l) => l.toFixed(1)).join(" ")} at the end`,
  );
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, "aged.json");
  writeFileSync(
    file,
    `${JSON.stringify({ machine: { ...machine, loadAverageAtEnd }, sizes: results, goals }, null, 2)}\n`,
  );
  console.log(`results: ${file}`);
}

async function fillAgedStore(dir: string, messages: number): Promise<Manifest> {
  return fillAged({
    data: join(dir, "data"),
    messages,
    weekEnd: Date.now(),
    manifest: join(dir, "manifest.json"),
    path: FILL_PATH,
  });
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
