/**
 * `npm run bench -- federation`: messages from an agent of one gateway to an agent of another
 * (a.bench → b.bench, federated over HTTP on loopback: the link's signed transfers, the receiving
 * gateway's directory lookup and checks) against the same traffic between two agents of one
 * gateway, measured in one run, both gateways in this process (embedded brokers).
 *
 * Throughput: BENCH_FED_MESSAGES signed notifications sent by the SDK with BENCH_FED_CONCURRENCY in
 * flight, timed until the recipient's SDK handled the last. Round trip: BENCH_FED_REQUESTS
 * sequential requests, the median. Reported: msgs/s and round trip for each, and the federated /
 * one-gateway ratios (goal: ≥ 0.5× one gateway's rate). The link is plain HTTP (test mode), so TLS
 * is not in the figures.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { AcpAgent } from "../../src/client/index.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { startDefaultGateway } from "../../src/server.js";
import { positiveInteger } from "../gateway/runs.js";

const MESSAGES = positiveInteger("BENCH_FED_MESSAGES", 3_000);
const CONCURRENCY = positiveInteger("BENCH_FED_CONCURRENCY", 64);
const REQUESTS = positiveInteger("BENCH_FED_REQUESTS", 200);
const ADMIN = "acpadm_bench-federation-0123456789abcdefghijkl";

const dirs: string[] = [];
async function gateway(domain: string) {
  const data = mkdtempSync(join(tmpdir(), `acp-bench-fed-${domain}-`));
  dirs.push(data);
  return startDefaultGateway({
    port: 0,
    data,
    adminToken: ADMIN,
    logger: pino({ level: "silent" }),
    allowPrivateUrls: ["127.0.0.1"],
    federation: { domain, listen: { host: "127.0.0.1", port: 0 }, insecureLoopback: true },
  });
}

async function admin(url: string, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
}

async function agent(url: string, agentId: string): Promise<AcpAgent> {
  const identity = generateIdentity(agentId, `principal-${agentId}`);
  const res = await fetch(`${url}/api/v1/agents`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify(publicIdentity(identity)),
  });
  if (res.status !== 201) throw new Error(`register ${agentId}: ${res.status}`);
  const { apiKey } = (await res.json()) as { apiKey: string };
  const a = new AcpAgent({ gateway: url, identity, apiKey, layers: [0, 1, 2], audit: false, state: false });
  await a.connect();
  return a;
}

interface Figures {
  perSecond: number;
  roundTripMs: number;
}

/** `from` sends to `to` (named `address`): throughput, then sequential round trips. */
async function measure(from: AcpAgent, to: AcpAgent, address: string): Promise<Figures> {
  await from.handshake(address);
  let received = 0;
  let allIn: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    allIn = resolve;
  });
  to.onNotification(() => {
    if (++received === MESSAGES) allIn();
  });
  to.onRequest("agent.request", (body) => body);
  const start = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < MESSAGES) {
      next++;
      await from.notify(address, { n: next, note: "x".repeat(200) });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await done;
  const perSecond = MESSAGES / ((performance.now() - start) / 1000);
  const times: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now();
    await from.request(address, { i });
    times.push(performance.now() - t);
  }
  times.sort((x, y) => x - y);
  return { perSecond, roundTripMs: times[Math.floor(times.length / 2)] ?? Number.NaN };
}

const a = await gateway("a.bench");
const b = await gateway("b.bench");
try {
  // Each serves /.well-known/acp on its main listener too, naming its federation endpoint.
  await admin(a.url, "/api/v1/federation/peers", { domain: "b.bench", url: b.url });
  await admin(b.url, "/api/v1/federation/peers", { domain: "a.bench", url: a.url });
  const local = await measure(await agent(a.url, "alice"), await agent(a.url, "bob"), "bob");
  const federated = await measure(await agent(a.url, "alpha"), await agent(b.url, "beta"), "beta@b.bench");
  console.log(
    `${MESSAGES} notifications (${CONCURRENCY} in flight), ${REQUESTS} sequential requests; ` +
      `load average ${loadavg()[0]?.toFixed(1)}\n`,
  );
  console.log("path                          msgs/s  round trip (median ms)");
  console.log("----------------------------  ------  ----------------------");
  for (const [name, f] of [
    ["one gateway (alice → bob)", local],
    ["two gateways (alpha → beta@b)", federated],
  ] as const) {
    console.log(
      `${name.padEnd(28)}  ${f.perSecond.toFixed(0).padStart(6)}  ${f.roundTripMs.toFixed(1).padStart(22)}`,
    );
  }
  console.log(
    `\nfederated / one gateway: ${(federated.perSecond / local.perSecond).toFixed(2)}× the rate (goal ≥ 0.5×), ` +
      `${(federated.roundTripMs / local.roundTripMs).toFixed(2)}× the round trip`,
  );
} finally {
  await Promise.all([a.close(), b.close()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
