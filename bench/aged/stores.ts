/** Preparing the stores the benchmark compares: the aged fill, an empty store with the same agents, sizes on disk. */
import { fork } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { publicIdentity } from "../../src/protocol/index.js";
import { ADMIN_TOKEN } from "../gateway/processes.js";
import type { FillConfig, Manifest } from "./fill.js";
import type { BenchGateway } from "./gateway.js";

const here = dirname(fileURLToPath(import.meta.url));

/** Runs a fill script (fill.js, fill-replay.js) in its own process; its progress lines go to stdout. */
export function runFill(script: string, config: object): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = fork(join(here, script), [JSON.stringify(config)], { stdio: "inherit" });
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${script} exited with ${code}`)),
    );
  });
}

export async function fillAged(config: FillConfig): Promise<Manifest> {
  await runFill("fill.js", config);
  return readManifest(config.manifest);
}

export function readManifest(file: string): Manifest {
  return JSON.parse(readFileSync(file, "utf8")) as Manifest;
}

/** Bytes of every relay audit log (`*.jsonl`) under `<data>/relay-audit`. */
function relayAuditBytes(data: string): number {
  const root = join(data, "relay-audit");
  let total = 0;
  for (const agent of existsSync(root) ? readdirSync(root) : [])
    for (const name of readdirSync(join(root, agent)))
      if (name.endsWith(".jsonl")) total += statSync(join(root, agent, name)).size;
  return total;
}

/**
 * Waits until the dashboard's relay audit index (`<data>/relay-audit-index.db`, written by the
 * running gateway) has read every log to its end; resolves with how long that took (ms).
 */
export async function waitForFeedIndex(data: string, timeoutMs = 60 * 60_000): Promise<number> {
  const started = performance.now();
  const file = join(data, "relay-audit-index.db");
  let last = "";
  for (;;) {
    const want = relayAuditBytes(data);
    let have = 0;
    if (existsSync(file)) {
      const db = new Database(file, { readonly: true, fileMustExist: true });
      try {
        have = (db.prepare("SELECT total(bytes) AS bytes FROM logs").get() as { bytes: number }).bytes;
      } catch {
        // the gateway has not made its tables yet
      } finally {
        db.close();
      }
    }
    if (have >= want) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error("the relay audit index did not catch up");
    const progress = `  relay audit index: ${Math.floor((100 * have) / Math.max(1, want))}%`;
    if (progress !== last) console.log(progress);
    last = progress;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** The same agents registered at a gateway (an empty store, or NATS): their new API keys. */
export async function registerAll(gateway: BenchGateway, manifest: Manifest): Promise<Manifest> {
  const agents: Manifest["agents"] = [];
  for (const { identity } of manifest.agents) {
    const res = await fetch(`${gateway.url}/api/v1/agents`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(publicIdentity(identity)),
    });
    if (res.status !== 201) throw new Error(`registering ${identity.agentId}: HTTP ${res.status}`);
    agents.push({ identity, apiKey: ((await res.json()) as { apiKey: string }).apiKey });
  }
  return { ...manifest, agents, samples: [], messages: 0, envelopeBytes: 0 };
}

/** Bytes of every file under `path` (a file or a directory). */
export function bytesUnder(path: string): number {
  let stats: ReturnType<typeof statSync>;
  try {
    stats = statSync(path);
  } catch {
    return 0;
  }
  if (!stats.isDirectory()) return stats.size;
  return readdirSync(path).reduce((sum, name) => sum + bytesUnder(join(path, name)), 0);
}

/** What the embedded store holds (up to `maxSeq`): messages, and how many still have their envelope. */
export function embeddedCounts(
  data: string,
  maxSeq = Number.MAX_SAFE_INTEGER,
): { messages: number; envelopes: number; envelopeBytes: number } {
  const db = new Database(join(data, "acp.db"), { readonly: true });
  try {
    const { messages } = db
      .prepare("SELECT count(*) AS messages FROM messages WHERE seq <= ?")
      .get(maxSeq) as {
      messages: number;
    };
    const row = db
      .prepare(
        "SELECT count(*) AS envelopes, total(length(CAST(envelope AS BLOB))) AS bytes FROM message_bodies WHERE seq <= ?",
      )
      .get(maxSeq) as { envelopes: number; bytes: number };
    return { messages, envelopes: row.envelopes, envelopeBytes: row.bytes };
  } finally {
    db.close();
  }
}

/** The embedded store's last message sequence number (0 when it holds none). */
export function lastSeqOf(data: string): number {
  const db = new Database(join(data, "acp.db"), { readonly: true });
  try {
    return (db.prepare("SELECT max(seq) AS seq FROM messages").get() as { seq: number | null }).seq ?? 0;
  } finally {
    db.close();
  }
}

/**
 * The last sequence number queued at or before `cutoff` (queue times never decrease with the
 * sequence, so a binary search over the primary key finds it).
 */
export function lastSeqQueuedBy(data: string, cutoff: number): number {
  const db = new Database(join(data, "acp.db"), { readonly: true });
  try {
    const at = db.prepare("SELECT queued_at FROM messages WHERE seq >= ? ORDER BY seq LIMIT 1");
    const bounds = db.prepare("SELECT min(seq) AS lo, max(seq) AS hi FROM messages").get() as {
      lo: number;
      hi: number;
    };
    let [lo, hi] = [bounds.lo - 1, bounds.hi];
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      const row = at.get(mid) as { queued_at: number } | undefined;
      if (row && row.queued_at <= cutoff) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  } finally {
    db.close();
  }
}
