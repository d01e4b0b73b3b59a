/**
 * The aged-store measurements on NATS JetStream: a `nats-server -js` started here, empty with the
 * same agents, then holding the embedded week replayed (fill-replay.ts) and the same relay audit
 * logs. What does not apply: the purge (the stream's `max_age` removes whole blocks inside
 * nats-server; JetStream stamps its own times, so a replayed week cannot be a week old) and
 * `acp audit verify` (the same logs as the embedded run).
 */
import { cpSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { findNatsServer, startNatsServer, stopChild } from "../gateway/processes.js";
import type { Manifest } from "./fill.js";
import { BenchGateway, rssOfPid } from "./gateway.js";
import { measureStore } from "./main.js";
import type { BrokerFigures, StoreFigures } from "./report.js";
import { bytesUnder, readManifest, registerAll, runFill } from "./stores.js";

async function withNats<T>(storeDir: string, work: (url: string, pid: number) => Promise<T>): Promise<T> {
  const binary = findNatsServer();
  if (!binary) throw new Error("nats-server is not installed (AGED_BROKERS=embedded skips NATS)");
  mkdirSync(storeDir, { recursive: true });
  const nats = await startNatsServer(binary, storeDir);
  try {
    return await work(nats.url, nats.child.pid as number);
  } finally {
    await stopChild(nats.child, 30_000);
  }
}

async function measureOn(
  url: string,
  pid: number,
  data: string,
  manifest: (gateway: BenchGateway) => Promise<Manifest>,
): Promise<StoreFigures> {
  const gateway = await BenchGateway.start({ data, nats: { servers: url } });
  try {
    const figures = await measureStore(gateway, await manifest(gateway));
    return { ...figures, natsRssBytes: rssOfPid(pid) };
  } finally {
    await gateway.stop();
  }
}

export async function measureNats(
  dir: string,
  week: Manifest,
  step: (text: string) => void,
): Promise<BrokerFigures> {
  step("nats, empty store: the same 1,000 agents, no messages");
  const empty = await withNats(join(dir, "nats-empty"), (url, pid) =>
    measureOn(url, pid, join(dir, "nats-empty-data"), (gateway) => registerAll(gateway, week)),
  );

  step("nats, aged store: the embedded week replayed into JetStream, the same relay audit logs");
  const storeDir = join(dir, "nats");
  const data = join(dir, "nats-data");
  const aged = await withNats(storeDir, async (url, pid) => {
    const manifestFile = join(dir, "manifest-nats.json");
    await runFill("fill-replay.js", {
      natsUrl: url,
      embeddedData: join(dir, "data"),
      embeddedManifest: join(dir, "manifest.json"),
      manifest: manifestFile,
    });
    const replayed = readManifest(manifestFile);
    mkdirSync(data, { recursive: true });
    // The logs and the index the embedded run built over them.
    cpSync(join(dir, "data", "relay-audit"), join(data, "relay-audit"), { recursive: true });
    const index = join(dir, "data", "relay-audit-index.db");
    if (existsSync(index)) cpSync(index, join(data, "relay-audit-index.db"));
    const figures = await measureOn(url, pid, data, async () => replayed);
    figures.disk = {
      storeBytes: bytesUnder(join(storeDir, "jetstream")),
      auditBytes: bytesUnder(join(data, "relay-audit")) + bytesUnder(join(data, "relay-audit-index.db")),
      messages: replayed.messages,
      envelopeMeanBytes: week.envelopeBytes / week.messages,
    };
    return { figures, fillSeconds: replayed.fillSeconds };
  });
  console.log(`  nats fill (replay): ${aged.fillSeconds.toFixed(0)} s`);
  return { empty, aged: aged.figures };
}
