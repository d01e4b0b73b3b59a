/**
 * The measurements taken on each store, empty and aged, with the same load generator: the relay
 * (the gateway benchmark's closed loop, 64 in flight, and its one-in-flight round trip), and each
 * read a user makes of a grown store, timed one at a time.
 */
import { createSigner } from "../../src/protocol/index.js";
import {
  type BenchAgent,
  handshake,
  Recipient,
  requestBody,
  SocketSubmitter,
  signedRequest,
} from "../gateway/acp-agents.js";
import { type LoadResult, percentile, runClosedLoop } from "../gateway/load.js";
import { RoundTripPair } from "../gateway/round-trip.js";
import type { Manifest } from "./fill.js";
import { adminCredential, type BenchGateway, getJson } from "./gateway.js";
import { AGENTS_PER_PRINCIPAL, WEEK_MS } from "./plan.js";

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const QUERIES = Number(process.env.AGED_QUERIES ?? 200);
/** Relay windows per store, one after another on the same gateway; the median one (by rate) is reported. */
const RELAY_WINDOWS = Number(process.env.AGED_RELAY_WINDOWS ?? 3);
const CONCURRENCY = 64;

export interface Latency {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Rows the read answered (`items`), on average: a read that returns more rows costs more. */
  rows?: number;
}

export interface RelayFigures {
  relay: LoadResult;
  roundTrip: LoadResult;
}

export function benchAgent(manifest: Manifest, index: number): BenchAgent {
  const { identity, apiKey } = manifest.agents[index] as Manifest["agents"][number];
  return {
    sender: { agentId: identity.agentId, principalId: identity.principalId, layers: [0, 1, 2] },
    signer: createSigner(identity),
    apiKey,
  };
}

/** The relay's pair: a sender and its recipient, handshaken through the gateway first. */
export async function relayPair(
  gateway: BenchGateway,
  manifest: Manifest,
): Promise<[BenchAgent, BenchAgent]> {
  const pair: [BenchAgent, BenchAgent] = [benchAgent(manifest, 1), benchAgent(manifest, 2)];
  await handshake(gateway.url, pair[0], pair[1]);
  return pair;
}

/** What each relay window watches beside the gateway. */
export interface RelayWatch {
  /** Other processes whose CPU per message each window reports, by name (nats-server). */
  pids?: Record<string, number>;
  /** Runs beside each window from its start (nats-server's CPU profile), awaited after it. */
  during?: (window: number) => Promise<void>;
}

/** One relay window: its rate, and the CPU each watched process spent per message relayed. */
export interface RelayWindow {
  perSecond: number;
  /** µs of CPU per message, by process: `gateway`, and the watched ones. */
  cpuMicrosPerMessage: Record<string, number>;
}

/**
 * AGED_RELAY_WINDOWS relay windows (default 3), one after another: the median one by rate, and each
 * one's rate and CPU per message, so a slow first window after start shows beside the ones after it,
 * and which process spends more on the aged store.
 */
export async function measureRelayWindows(
  gateway: BenchGateway,
  pair: [BenchAgent, BenchAgent],
  watch: RelayWatch = {},
): Promise<{ relay: LoadResult; windows: RelayWindow[] }> {
  const runs: LoadResult[] = [];
  for (let window = 0; window < RELAY_WINDOWS; window++) {
    const beside = watch.during?.(window + 1);
    runs.push(await measureRelay(gateway, pair, undefined, watch.pids));
    await beside;
  }
  const byRate = [...runs].sort((a, b) => a.perSecond - b.perSecond);
  const relay = byRate[Math.floor((byRate.length - 1) / 2)];
  if (!relay) throw new Error("AGED_RELAY_WINDOWS must be at least 1");
  const windows = runs.map((run) => ({
    perSecond: run.perSecond,
    cpuMicrosPerMessage: Object.fromEntries(
      Object.entries(run.cpuPercent)
        .filter(([name]) => name !== "client")
        .map(([name, percent]) => [name, (percent / 100 / run.perSecond) * 1e6]),
    ),
  }));
  return { relay, windows };
}

/**
 * 64 signed ~1 KB requests in flight, submit → delivered, for BENCH_SECONDS; with `until`, from the
 * warm-up's end until it resolves true (at most `maxMs`). `pids`: other processes whose CPU share
 * the result reports beside the gateway's.
 */
export async function measureRelay(
  gateway: BenchGateway,
  [sender, recipientAgent]: [BenchAgent, BenchAgent],
  until?: { done: () => Promise<boolean>; maxMs: number },
  pids: Record<string, number> = {},
): Promise<LoadResult> {
  const submitter = await SocketSubmitter.connect(gateway.wsUrl, sender);
  const recipient = await Recipient.connect(gateway.wsUrl, recipientAgent);
  const body = requestBody(sender, recipientAgent.sender.agentId, 1024);
  // Submits accepted and deliveries, per second from the warm-up's start: when a window stalls,
  // this shows when, and on which side.
  const counts = { accepted: 0, delivered: 0 };
  const perSecond = { accepted: [] as number[], delivered: [] as number[] };
  let last = { ...counts };
  const ticker = setInterval(() => {
    perSecond.accepted.push(counts.accepted - last.accepted);
    perSecond.delivered.push(counts.delivered - last.delivered);
    last = { ...counts };
  }, 1000);
  try {
    return await runClosedLoop(
      async () => {
        const { id, text } = signedRequest(sender, recipientAgent.sender.agentId, body);
        const deliveredAt = recipient.expect(id);
        // Awaited below; if the submit fails first (or the run is torn down) it is not left unhandled.
        deliveredAt.catch(() => undefined);
        const started = performance.now();
        await submitter.submit(text).catch((error: Error) => {
          recipient.forget(id);
          throw error;
        });
        counts.accepted++;
        const took = (await deliveredAt) - started;
        counts.delivered++;
        return took;
      },
      {
        concurrency: CONCURRENCY,
        warmupMs: WARMUP_SECONDS * 1000,
        measureMs: until?.maxMs ?? SECONDS * 1000,
        watch: { gateway: gateway.child.pid ?? 0, ...pids },
        ...(until ? { until: until.done } : {}),
      },
    );
  } finally {
    clearInterval(ticker);
    console.log(
      `  relay per second from the warm-up's start, submits accepted: ${perSecond.accepted.join(" ")}`,
    );
    console.log(`  relay per second from the warm-up's start, delivered: ${perSecond.delivered.join(" ")}`);
    submitter.close();
    recipient.close();
  }
}

export async function measureRoundTrip(
  gateway: BenchGateway,
  [requester, responder]: [BenchAgent, BenchAgent],
): Promise<LoadResult> {
  const pair = await RoundTripPair.connect(gateway.wsUrl, requester, responder, { action: "ping" });
  try {
    return await runClosedLoop(() => pair.roundTrip(), {
      concurrency: 1,
      warmupMs: WARMUP_SECONDS * 1000,
      measureMs: SECONDS * 1000,
      watch: { gateway: gateway.child.pid ?? 0 },
    });
  } finally {
    pair.close();
  }
}

function latency(samples: number[], rows: number[] = []): Latency {
  const sorted = Float64Array.from(samples).sort();
  return {
    count: sorted.length,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
    ...(rows.length > 0 ? { rows: rows.reduce((sum, n) => sum + n, 0) / rows.length } : {}),
  };
}

/** Runs `request(i)` QUERIES times, one at a time, after a few untimed ones; each must answer 200. */
async function timed(
  what: string,
  request: (index: number) => Promise<{ status: number; body: Record<string, unknown>; ms: number }>,
): Promise<Latency> {
  const samples: number[] = [];
  const rows: number[] = [];
  for (let index = -5; index < QUERIES; index++) {
    const { status, body, ms } = await request(index + 5);
    if (status !== 200) throw new Error(`${what}: HTTP ${status} ${JSON.stringify(body).slice(0, 300)}`);
    if (index < 0) continue;
    samples.push(ms);
    if (Array.isArray(body.items)) rows.push(body.items.length);
  }
  return latency(samples, rows);
}

/** Deep cursors: for some agents, the cursor of a page 90% of the way through their history. */
async function deepCursors(
  gateway: BenchGateway,
  manifest: Manifest,
): Promise<{ agent: number; cursor: string }[]> {
  const found: { agent: number; cursor: string }[] = [];
  for (let agent = 10; agent < manifest.agents.length && found.length < 20; agent += 47) {
    const apiKey = (manifest.agents[agent] as Manifest["agents"][number]).apiKey;
    const cursors: string[] = [];
    let cursor: string | null = null;
    do {
      const url = `${gateway.url}/api/v1/messages?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page = await getJson(url, { apiKey });
      cursor = page.body.nextCursor as string | null;
      if (cursor) cursors.push(cursor);
    } while (cursor);
    const deep = cursors[Math.floor(cursors.length * 0.9)];
    if (deep) found.push({ agent, cursor: deep });
  }
  return found;
}

export type QueryFigures = Record<string, Latency>;

/** Each read a user makes of the store, QUERIES times each, spread over agents and messages. */
export async function measureQueries(gateway: BenchGateway, manifest: Manifest): Promise<QueryFigures> {
  const agents = manifest.agents;
  const agentAt = (i: number) => agents[(i * 37) % agents.length] as Manifest["agents"][number];
  const sample = (i: number) => manifest.samples[(i * 7919) % Math.max(1, manifest.samples.length)];
  const api = `${gateway.url}/api/v1`;
  const principal = await principalToken(gateway, agents[0]?.identity.principalId as string);
  const figures: QueryFigures = {};
  figures["GET /messages?from=self"] = await timed("by sender", (i) => {
    const agent = agentAt(i);
    return getJson(`${api}/messages?from=${agent.identity.agentId}`, { apiKey: agent.apiKey });
  });
  figures["GET /messages?to=self"] = await timed("by recipient", (i) => {
    const agent = agentAt(i);
    return getJson(`${api}/messages?to=${agent.identity.agentId}`, { apiKey: agent.apiKey });
  });
  const deep = await deepCursors(gateway, manifest);
  if (deep.length > 0) {
    figures["GET /messages?cursor=deep"] = await timed("deep cursor", (i) => {
      const { agent, cursor } = deep[i % deep.length] as { agent: number; cursor: string };
      const apiKey = (agents[agent] as Manifest["agents"][number]).apiKey;
      return getJson(`${api}/messages?cursor=${encodeURIComponent(cursor)}`, { apiKey });
    });
  }
  if (manifest.samples.length > 0) {
    const keyOf = new Map(agents.map((a) => [a.identity.agentId, a.apiKey]));
    figures["GET /messages/:id/status"] = await timed("status", (i) => {
      const { id, from } = sample(i) as Manifest["samples"][number];
      return getJson(`${api}/messages/${id}/status`, { apiKey: keyOf.get(from) as string });
    });
    figures["dashboard message detail"] = await timed("detail", (i) => {
      const { id, from } = sample(i) as Manifest["samples"][number];
      return getJson(`${api}/dashboard/messages/${id}?from=${encodeURIComponent(from)}`, adminCredential);
    });
  }
  figures["dashboard feed (admin)"] = await timed("feed", () =>
    getJson(`${api}/dashboard/feed`, adminCredential),
  );
  figures["dashboard feed (principal)"] = await timed("feed", () =>
    getJson(`${api}/dashboard/feed`, { token: principal }),
  );
  const week = new Date(Date.now() - WEEK_MS).toISOString();
  // Over the week, not the feed's default day: an agent's day holds about 55 entries at 200,000
  // messages and several hundred at 2,000,000, so a day's page would be a full page (100) only on
  // the larger store, and the two would not compare the same work.
  figures["dashboard feed (one agent)"] = await timed("feed", (i) =>
    getJson(`${api}/dashboard/feed?agent=${agentAt(i).identity.agentId}&since=${week}`, adminCredential),
  );
  figures["dashboard volume 7 d (admin)"] = await timed("volume", () =>
    getJson(`${api}/dashboard/volume?since=${week}`, adminCredential),
  );
  figures["dashboard volume 7 d (principal)"] = await timed("volume", () =>
    getJson(`${api}/dashboard/volume?since=${week}`, { token: principal }),
  );
  return figures;
}

/** A principal's dashboard token (its agents: AGENTS_PER_PRINCIPAL of the 1,000). */
async function principalToken(gateway: BenchGateway, principalId: string): Promise<string> {
  const res = await fetch(`${gateway.url}/api/v1/dashboard/principals`, {
    method: "POST",
    headers: { authorization: `Bearer ${adminCredential.token}`, "content-type": "application/json" },
    body: JSON.stringify({ principalId }),
  });
  if (res.status !== 201) throw new Error(`principal token: HTTP ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

export const PRINCIPAL_AGENTS = AGENTS_PER_PRINCIPAL;
