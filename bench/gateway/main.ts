/**
 * `npm run bench -- gateway`: end-to-end ACP relay throughput and latency. One sending
 * agent signs each ~1 KB request in the timed loop and submits it; the gateway (the real
 * `acp gateway` CLI, in its own process) validates, verifies the Ed25519 signature, checks the
 * handshake, persists and audits it, then delivers it over WebSocket to the recipient, which
 * acknowledges it. 64 messages are in flight at all times: a slot is freed only when the message
 * has been both accepted (submit answer) and received by the recipient. Latency = submit sent →
 * `new_message` received by the recipient.
 *
 * Configurations: each broker (embedded SQLite; NATS JetStream on a nats-server started here) ×
 * each submit path (WebSocket `submit` frame; HTTP POST /api/v1/messages with keep-alive). Peers in
 * the same run: plain node:http + one Ed25519 verify per request (the ceiling), and the
 * A2A JS SDK (echo agent, `sendMessage`). Every server runs in a child process, so on this 2-core
 * machine the load generator (this process) and the server under test each get a core.
 *
 * Env: BENCH_SECONDS (timed window per configuration, default 10), BENCH_WARMUP_SECONDS (default 3),
 * BENCH_ONLY (comma list of a2a, http-verify, embedded, nats), BENCH_GATEWAY_PROFILE=1 (run the
 * gateway under --cpu-prof and print its hot spots), BENCH_RUNS (default 1: run everything this many
 * times, one after the other, and end with the median of the runs' goal ratios and round trips). JSON goes to bench/results/gateway.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Role } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { createSigner, generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import {
  acknowledgedByGateway,
  type BenchAgent,
  handshake,
  httpSubmit,
  Recipient,
  registerAgent,
  requestBody,
  SocketSubmitter,
  signedRequest,
} from "./acp-agents.js";
import { checkGoals, measureRawVerifyMicros, printGoals } from "./goals.js";
import { HttpPoster } from "./http-post.js";
import { runClosedLoop, sleep } from "./load.js";
import { findNatsServer, forkPeerServer, spawnGateway, startNatsServer, stopChild } from "./processes.js";
import { hotSpots, type ProfileSummary } from "./profile.js";
import { printReport, type Row } from "./report.js";
import { positiveInteger, printRunsSummary, type RunResult, summarizeRuns } from "./runs.js";
import { RoundTripPair } from "./round-trip.js";

const CONCURRENCY = 64;
const ENVELOPE_BYTES = 1024;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const ONLY = new Set(
  (process.env.BENCH_ONLY ?? "a2a,http-verify,embedded,nats").split(",").map((s) => s.trim()),
);
const PROFILE = process.env.BENCH_GATEWAY_PROFILE === "1";
const RUNS = positiveInteger("BENCH_RUNS", 1);

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "../../..");
const resultsDir = join(repoRoot, "bench/results");

const loadOptions = (watch: Record<string, number>, concurrency = CONCURRENCY) => ({
  concurrency,
  warmupMs: WARMUP_SECONDS * 1000,
  measureMs: SECONDS * 1000,
  watch,
});

function progress(text: string): void {
  process.stdout.write(`  ${text}\n`);
}

async function measureA2A(): Promise<Row[]> {
  progress("A2A JS SDK echo agent (express, JSON-RPC) …");
  const peer = await forkPeerServer("a2a-echo", {});
  try {
    const client = await new ClientFactory().createFromUrl(peer.url);
    const text = "x".repeat(ENVELOPE_BYTES - 300); // about the same bytes on the wire as our envelope
    const operation = async () => {
      const started = performance.now();
      const result = await client.sendMessage({
        tenant: "",
        message: {
          messageId: crypto.randomUUID(),
          contextId: "",
          taskId: "",
          role: Role.ROLE_USER,
          parts: [
            {
              content: { $case: "text", value: text },
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
      });
      const echoed = "parts" in result ? result.parts[0]?.content : undefined;
      if (echoed?.$case !== "text" || echoed.value !== text)
        throw new Error(`A2A echo returned ${JSON.stringify(result).slice(0, 300)}`);
      return performance.now() - started;
    };
    const watch = { server: peer.child.pid ?? 0 };
    const result = await runClosedLoop(operation, loadOptions(watch));
    progress("A2A JS SDK echo agent, one request in flight …");
    const roundTrip = await runClosedLoop(operation, loadOptions(watch, 1));
    return [
      {
        key: "a2a",
        configuration: "A2A JS SDK echo agent",
        path: "HTTP JSON-RPC sendMessage (fetch)",
        result,
      },
      {
        key: "a2a-rt",
        configuration: "A2A JS SDK echo agent",
        path: "sendMessage → echoed reply",
        result: roundTrip,
      },
    ];
  } finally {
    await stopChild(peer.child);
  }
}

async function measureHttpVerify(): Promise<Row> {
  progress("plain node:http + one Ed25519 verify per request …");
  const identity = generateIdentity("agent-alpha", "principal-of-agent-alpha");
  const agent: BenchAgent = {
    sender: { agentId: "agent-alpha", principalId: identity.principalId, layers: [0, 1, 2] },
    signer: createSigner(identity),
    apiKey: "",
  };
  const peer = await forkPeerServer("http-verify", {
    agentId: "agent-alpha",
    signing: publicIdentity(identity).signing,
  });
  const poster = new HttpPoster(peer.url, CONCURRENCY);
  try {
    const body = requestBody(agent, "agent-beta", ENVELOPE_BYTES);
    const operation = async () => {
      const { text } = signedRequest(agent, "agent-beta", body);
      const started = performance.now();
      const res = await poster.post("/", text);
      if (res.status !== 200) throw new Error(`http-verify peer: HTTP ${res.status} ${res.text}`);
      return performance.now() - started;
    };
    const result = await runClosedLoop(operation, loadOptions({ server: peer.child.pid ?? 0 }));
    return {
      key: "http-verify",
      configuration: "plain node:http + Ed25519 verify",
      path: "HTTP POST, keep-alive",
      result,
    };
  } finally {
    poster.close();
    await stopChild(peer.child);
  }
}

/** One gateway (and nats-server) per broker; both submit paths run against it, one after the other. */
async function measureGateway(
  broker: "embedded" | "nats",
): Promise<{ rows: Row[]; profile?: ProfileSummary }> {
  const scratch = mkdtempSync(join(tmpdir(), `acp-bench-gw-${broker}-`));
  const profileDir = PROFILE ? join(resultsDir, `gateway-profile-${broker}`) : undefined;
  if (profileDir) {
    rmSync(profileDir, { recursive: true, force: true });
    mkdirSync(profileDir, { recursive: true });
  }
  let nats: Awaited<ReturnType<typeof startNatsServer>> | undefined;
  if (broker === "nats") {
    const binary = findNatsServer();
    if (!binary) throw new Error("nats-server is not installed (apt-get install nats-server)");
    nats = await startNatsServer(binary, join(scratch, "nats"));
  }
  const gateway = await spawnGateway({
    dataDir: join(scratch, "data"),
    ...(nats ? { natsUrl: nats.url } : {}),
    ...(profileDir ? { profileDir } : {}),
  });
  const watch: Record<string, number> = {
    server: gateway.child.pid ?? 0,
    ...(nats ? { nats: nats.child.pid ?? 0 } : {}),
  };
  const rows: Row[] = [];
  try {
    const alpha = await registerAgent(gateway.url, "agent-alpha");
    const beta = await registerAgent(gateway.url, "agent-beta");
    await handshake(gateway.url, alpha, beta);
    const recipient = await Recipient.connect(gateway.wsUrl, beta);
    const socket = await SocketSubmitter.connect(gateway.wsUrl, alpha);
    const poster = new HttpPoster(gateway.url, CONCURRENCY);
    const body = requestBody(alpha, beta.sender.agentId, ENVELOPE_BYTES);
    const paths = [
      { path: "WebSocket submit frame", submit: (text: string) => socket.submit(text) },
      { path: "HTTP POST, keep-alive", submit: (text: string) => httpSubmit(poster, alpha.apiKey, text) },
    ];
    for (const { path, submit } of paths) {
      progress(`gateway, ${broker} broker, ${path} …`);
      const operation = async () => {
        const { id, text } = signedRequest(alpha, beta.sender.agentId, body);
        const delivered = recipient.expect(id);
        const started = performance.now();
        try {
          const [receivedAt] = await Promise.all([delivered, submit(text)]);
          return receivedAt - started;
        } catch (err) {
          recipient.forget(id);
          throw err;
        }
      };
      const result = await runClosedLoop(operation, loadOptions(watch));
      rows.push({
        key: `${broker}-${path.startsWith("WebSocket") ? "ws" : "http"}`,
        configuration: `ACP gateway, ${broker} broker`,
        path,
        result,
      });
    }
    await confirmAcknowledged(gateway.url, recipient.acknowledged);
    socket.close();
    recipient.close();
    poster.close();
    rows.push(await measureRoundTrip(gateway, broker, watch));
  } finally {
    await stopChild(gateway.child);
    if (nats) await stopChild(nats.child);
    rmSync(scratch, { recursive: true, force: true });
  }
  return { rows, ...(profileDir ? { profile: hotSpots(profileDir, repoRoot) } : {}) };
}

/** Two more agents, one request → response round trip in flight (the latency of a conversation). */
async function measureRoundTrip(
  gateway: { url: string; wsUrl: string },
  broker: string,
  watch: Record<string, number>,
): Promise<Row> {
  progress(`gateway, ${broker} broker, request → response round trip, one in flight …`);
  const gamma = await registerAgent(gateway.url, "agent-gamma");
  const delta = await registerAgent(gateway.url, "agent-delta");
  await handshake(gateway.url, gamma, delta);
  const pair = await RoundTripPair.connect(
    gateway.wsUrl,
    gamma,
    delta,
    requestBody(gamma, delta.sender.agentId, ENVELOPE_BYTES),
  );
  try {
    const result = await runClosedLoop(() => pair.roundTrip(), loadOptions(watch, 1));
    return {
      key: `${broker}-rt`,
      configuration: `ACP gateway, ${broker} broker`,
      path: "request → response, WebSocket",
      result,
    };
  } finally {
    pair.close();
  }
}

/** The recipient's acknowledgements must all have been processed by the gateway, not just sent. */
async function confirmAcknowledged(gatewayUrl: string, sent: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  let processed = 0;
  while (Date.now() < deadline) {
    processed = await acknowledgedByGateway(gatewayUrl);
    if (processed >= sent) {
      progress(`the gateway processed all ${sent.toLocaleString("en-US")} acknowledgements`);
      return;
    }
    await sleep(200);
  }
  throw new Error(`the gateway processed only ${processed} of ${sent} acknowledgements`);
}

const cpuModel = cpus()[0]?.model ?? "unknown";
console.log(
  `gateway end to end: ${CONCURRENCY} in flight, ~${ENVELOPE_BYTES} B signed requests, ` +
    `${WARMUP_SECONDS} s warm-up + ${SECONDS} s timed per configuration; ${cpus().length} × ${cpuModel}, node ${process.version}`,
);
/** One run of every configuration; the ratios are taken within a run. */
async function measureOnce(): Promise<RunResult> {
  // Measured before any load, while this process is otherwise idle.
  const rawVerifyMicros = measureRawVerifyMicros();
  const rows: Row[] = [];
  const profiles: Record<string, ProfileSummary> = {};
  if (ONLY.has("a2a")) rows.push(...(await measureA2A()));
  if (ONLY.has("http-verify")) rows.push(await measureHttpVerify());
  for (const broker of ["embedded", "nats"] as const) {
    if (!ONLY.has(broker)) continue;
    const measured = await measureGateway(broker);
    rows.push(...measured.rows);
    if (measured.profile) profiles[broker] = measured.profile;
  }
  const report = printReport(rows, profiles);
  const goals = checkGoals(rows, rawVerifyMicros);
  printGoals(goals, rawVerifyMicros);
  return {
    date: new Date().toISOString(),
    loadAverage: loadavg(),
    rows: report.rows,
    goal: report.goal,
    rawVerifyMicros: Number(rawVerifyMicros.toFixed(1)),
    goals: goals,
    profiles,
  };
}

const runs: RunResult[] = [];
for (let run = 1; run <= RUNS; run++) {
  if (RUNS > 1) console.log(`\n=== run ${run} of ${RUNS} ===`);
  runs.push(await measureOnce());
}
const summary = RUNS > 1 ? summarizeRuns(runs) : undefined;
if (summary) printRunsSummary(summary);
mkdirSync(resultsDir, { recursive: true });
const last = runs[runs.length - 1] as RunResult;
writeFileSync(
  join(resultsDir, "gateway.json"),
  `${JSON.stringify(
    {
      benchmark: "gateway",
      machine: { cpus: cpus().length, cpuModel, node: process.version },
      settings: {
        concurrency: CONCURRENCY,
        envelopeBytes: ENVELOPE_BYTES,
        warmupSeconds: WARMUP_SECONDS,
        seconds: SECONDS,
        runs: RUNS,
      },
      // The last run's figures at the top level, as before; every run under `runs`.
      ...last,
      ...(summary ? { median: summary } : {}),
      runs,
    },
    null,
    2,
  )}\n`,
);
console.log("\nJSON: bench/results/gateway.json");
