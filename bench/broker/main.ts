/**
 * `npm run bench -- broker`: submit → deliver → ack through each broker with 64 messages in flight
 * (a message counts from submit until its ack resolved), spread over 8 sender→recipient pairs.
 * Peer: bare JetStream (publish with Nats-Msg-Id, pull, ack) on the same nats-server, to show
 * what the status bookkeeping costs. NATS rows need `nats-server` (apt-get install nats-server).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { type Broker, type Delivery, openBroker } from "../../src/broker/index.js";
import { freePort } from "../gateway/processes.js";

const IN_FLIGHT = 64;
const PAIRS = 8;
const ENVELOPE = JSON.stringify({
  jsonrpc: "2.0",
  method: "agent.request",
  params: { headers: { "agent-id": "bench-sender" }, body: { text: "x".repeat(600) } },
  id: "00000000-0000-4000-8000-000000000000",
  signature: "y".repeat(86),
});

interface Result {
  name: string;
  messages: number;
  seconds: number;
  /** CPU time of this process per message (nats-server's own CPU not included). */
  cpuMicros: number;
  p50: number;
  p99: number;
}

function failed(error: unknown): never {
  console.error(error);
  process.exit(1);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

/** Keeps IN_FLIGHT messages outstanding; `send(i)` resolves when message i was acknowledged. */
async function drive(name: string, total: number, send: (index: number) => Promise<void>): Promise<Result> {
  const latencies: number[] = [];
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const worker = async () => {
    while (next < total) {
      const index = next++;
      const t0 = performance.now();
      await send(index);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  latencies.sort((a, b) => a - b);
  return {
    name,
    messages: total,
    seconds,
    cpuMicros: (cpu.user + cpu.system) / total,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

async function runBroker(name: string, broker: Broker, total: number, warmup: number): Promise<Result> {
  const waiting = new Map<string, () => void>();
  const run = `${Date.now().toString(36)}`;
  const loops = await Promise.all(
    Array.from({ length: PAIRS }, async (_, pair) => {
      const inbox = await broker.openInbox(`bench-rcpt-${pair}`, { maxInFlight: IN_FLIGHT });
      const loop = (async () => {
        // Acks are not awaited in turn: like a gateway, the recipient acks while more deliveries arrive.
        for await (const delivery of inbox as AsyncIterable<Delivery>) {
          broker.ack(delivery.to, delivery).then(() => waiting.get(delivery.id)?.(), failed);
        }
      })();
      return { inbox, loop };
    }),
  );
  const send = (prefix: string) => (index: number) =>
    new Promise<void>((resolve, reject) => {
      const id = `bench-${run}-${prefix}-${index}`;
      waiting.set(id, () => {
        waiting.delete(id);
        resolve();
      });
      broker
        .submit({
          id,
          from: `bench-sndr-${index % PAIRS}`,
          to: `bench-rcpt-${index % PAIRS}`,
          kind: "request",
          method: "agent.request",
          envelope: ENVELOPE,
          submittedAt: new Date().toISOString(),
        })
        .catch(reject);
    });
  await drive(`${name} warm-up`, warmup, send("w"));
  const result = await drive(name, total, send("m"));
  await Promise.all(loops.map(({ inbox }) => inbox.close()));
  await Promise.all(loops.map(({ loop }) => loop));
  return result;
}

async function runBareJetStream(url: string, total: number): Promise<Result> {
  const nc = await connect({ servers: url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "BENCH_BARE", subjects: ["bench.bare.*"] });
  const js = jetstream(nc);
  const waiting = new Map<number, () => void>();
  const loops: Array<Promise<void>> = [];
  const closers: Array<() => Promise<void>> = [];
  for (let pair = 0; pair < PAIRS; pair++) {
    await jsm.consumers.add("BENCH_BARE", {
      durable_name: `bare-${pair}`,
      filter_subject: `bench.bare.${pair}`,
      ack_policy: AckPolicy.Explicit,
      max_ack_pending: IN_FLIGHT,
    });
    const messages = await (await js.consumers.get("BENCH_BARE", `bare-${pair}`)).consume({
      max_messages: IN_FLIGHT,
    });
    closers.push(async () => {
      await messages.close();
    });
    loops.push(
      (async () => {
        for await (const msg of messages) {
          msg.ackAck().then(() => waiting.get(Number(msg.headers?.get("Nats-Msg-Id")))?.(), failed);
        }
      })(),
    );
  }
  const result = await drive("bare JetStream (peer)", total, (index) => {
    return new Promise<void>((resolve, reject) => {
      waiting.set(index, () => {
        waiting.delete(index);
        resolve();
      });
      js.publish(`bench.bare.${index % PAIRS}`, ENVELOPE, { msgID: String(index) }).catch(reject);
    });
  });
  for (const close of closers) await close();
  await Promise.all(loops);
  await nc.close();
  return result;
}

async function startNatsServer(storeDir: string): Promise<{ url: string; child: ChildProcess } | null> {
  const binary = ["/usr/bin/nats-server", "/usr/sbin/nats-server", "/usr/local/bin/nats-server"].find(
    (path) => existsSync(path),
  );
  if (!binary) return null;
  const port = await freePort();
  const child = spawn(binary, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let log = "";
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      log += chunk;
      if (log.includes("Server is ready")) resolve();
    });
    child.once("exit", () => reject(new Error(`nats-server exited:\n${log}`)));
  });
  return { url: `nats://127.0.0.1:${port}`, child };
}

function table(results: Result[]): void {
  const base = results[0];
  console.log(`\n${IN_FLIGHT} in flight, ${PAIRS} sender→recipient pairs, ${ENVELOPE.length}-byte envelopes`);
  console.log("broker                      messages   msgs/s   p50 ms   p99 ms  cpu µs/msg  vs embedded");
  for (const r of results) {
    const rate = r.messages / r.seconds;
    const ratio = base ? rate / (base.messages / base.seconds) : Number.NaN;
    console.log(
      `${r.name.padEnd(26)} ${String(r.messages).padStart(9)} ${rate.toFixed(0).padStart(8)} ${r.p50
        .toFixed(2)
        .padStart(
          8,
        )} ${r.p99.toFixed(2).padStart(8)} ${r.cpuMicros.toFixed(0).padStart(11)}  ${ratio.toFixed(2)}×`,
    );
  }
}

const dir = mkdtempSync(join(tmpdir(), "acp-bench-broker-"));
const results: Result[] = [];
try {
  const embedded = await openBroker({ data: join(dir, "embedded") });
  results.push(await runBroker("embedded (SQLite)", embedded, 60_000, 5_000));
  await embedded.close();

  const nats = await startNatsServer(join(dir, "nats"));
  if (!nats) {
    console.log("nats-server not found: NATS rows skipped (apt-get install nats-server)");
  } else {
    try {
      const natsBroker = await openBroker({ nats: { servers: nats.url } });
      results.push(await runBroker("nats (JetStream)", natsBroker, 15_000, 2_000));
      await natsBroker.close();
      results.push(await runBareJetStream(nats.url, 15_000));
    } finally {
      nats.child.kill("SIGKILL");
    }
  }
  table(results);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
