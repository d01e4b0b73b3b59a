/**
 * `npm run bench -- phoenix`: an agent's inbox drained over Phoenix Channels (`/socket/websocket`,
 * with Phoenix's own `phoenix` client) against the same inbox drained over the native socket
 * (`/api/v1/ws`), on one gateway: the real `acp gateway` (embedded broker) in its own process.
 *
 * Each round queues BENCH_PHOENIX_MESSAGES signed ~1 KB notifications for bob while he is offline;
 * then bob connects, and acknowledges every delivery as it arrives (the window: 256 unacknowledged).
 * Timed from the connection to the gateway having counted every acknowledgement. Rounds alternate
 * native and Phoenix, so a burst of load elsewhere on the machine hits both alike. Reported per
 * protocol: the median round's messages/s, the gateway's and the client's CPU µs per message, and
 * Phoenix's ratios to native (the peer: the same inbox behind the gateway's own protocol).
 *
 * Env: BENCH_PHOENIX_MESSAGES (default 5,000), BENCH_PHOENIX_ROUNDS (rounds per protocol, default 5).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Socket, type SocketConnectOption } from "phoenix";
import { WebSocket } from "ws";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import {
  acknowledgedByGateway,
  type BenchAgent,
  handshake,
  openSocket,
  registerAgent,
  SocketSubmitter,
} from "../gateway/acp-agents.js";
import { cpuSecondsOf, type GatewayProcess, spawnGateway, stopChild } from "../gateway/processes.js";
import { positiveInteger } from "../gateway/runs.js";

const MESSAGES = positiveInteger("BENCH_PHOENIX_MESSAGES", 5_000);
const ROUNDS = positiveInteger("BENCH_PHOENIX_ROUNDS", 5);
const BODY_NOTE_BYTES = 800;
/** Submissions in flight while the queue is filled. */
const QUEUE_CONCURRENCY = 128;
const DRAIN_TIMEOUT_MS = 120_000;

type Protocol = "native" | "phoenix";
interface Round {
  seconds: number;
  gatewayCpuSeconds: number;
  /** This process's: the recipient's client. */
  clientCpuSeconds: number;
}

/** The native recipient: every delivery acknowledged as it arrives. */
function acknowledgeEach(text: string, socket: WebSocket): void {
  const frame = JSON.parse(text) as { type: string; id: string; from: string };
  if (frame.type === "new_message")
    socket.send(
      `{"type":"acknowledge","id":${JSON.stringify(frame.id)},"from":${JSON.stringify(frame.from)}}`,
    );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Fills bob's inbox with `MESSAGES` notifications from alice, bob offline. */
async function fillInbox(submitter: SocketSubmitter, alice: BenchAgent): Promise<void> {
  const body = { note: "x".repeat(BODY_NOTE_BYTES) };
  let next = 0;
  const worker = async () => {
    while (next < MESSAGES) {
      next++;
      const envelope = signMessage(buildNotification(alice.sender, "bob", body), alice.signer);
      await submitter.submit(JSON.stringify(envelope));
    }
  };
  await Promise.all(Array.from({ length: QUEUE_CONCURRENCY }, worker));
}

/** Resolves once the gateway counted `target` acknowledgements in all. */
async function acknowledgedUpTo(gateway: GatewayProcess, target: number): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  while ((await acknowledgedByGateway(gateway.url)) < target) {
    if (Date.now() > deadline) throw new Error(`the inbox was not drained within ${DRAIN_TIMEOUT_MS} ms`);
    await sleep(10);
  }
}

/** Bob connects with `protocol`, acknowledges everything, and leaves; returns what it took. */
async function drain(gateway: GatewayProcess, bob: BenchAgent, protocol: Protocol): Promise<Round> {
  const target = (await acknowledgedByGateway(gateway.url)) + MESSAGES;
  const cpuBefore = cpuSecondsOf(gateway.child.pid as number);
  const clientBefore = process.cpuUsage();
  const start = performance.now();
  let close: () => void;
  if (protocol === "native") {
    const ws = await openSocket(gateway.wsUrl, bob.apiKey, acknowledgeEach);
    close = () => ws.close();
  } else {
    const socket = new Socket(`${gateway.url.replace(/^http/, "ws")}/socket`, {
      transport: WebSocket as unknown as SocketConnectOption["transport"],
      params: { api_key: bob.apiKey },
      reconnectAfterMs: () => 3_600_000,
    });
    const channel = socket.channel("messages:bob", {});
    channel.on("new_message", (message: { id: string }) => {
      channel.push("acknowledge", { id: message.id });
    });
    socket.connect();
    await new Promise<void>((resolve, reject) => {
      channel
        .join()
        .receive("ok", () => resolve())
        .receive("error", (why: unknown) => reject(new Error(`join refused: ${JSON.stringify(why)}`)));
    });
    close = () => socket.disconnect();
  }
  await acknowledgedUpTo(gateway, target);
  const seconds = (performance.now() - start) / 1000;
  const gatewayCpuSeconds = cpuSecondsOf(gateway.child.pid as number) - cpuBefore;
  const client = process.cpuUsage(clientBefore);
  close();
  await sleep(200); // the connection ends before the next round queues more
  return { seconds, gatewayCpuSeconds, clientCpuSeconds: (client.user + client.system) / 1e6 };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

const dataDir = mkdtempSync(join(tmpdir(), "acp-bench-phoenix-"));
const gateway = await spawnGateway({ dataDir });
try {
  const alice = await registerAgent(gateway.url, "alice");
  const bob = await registerAgent(gateway.url, "bob");
  await handshake(gateway.url, alice, bob);
  // The handshake's messages to bob are delivered (and acknowledged) before anything is timed.
  await drainHandshake(gateway, bob);
  const submitter = await SocketSubmitter.connect(gateway.wsUrl, alice);

  const rounds: Record<Protocol, Round[]> = { native: [], phoenix: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const protocol of ["native", "phoenix"] as const) {
      await fillInbox(submitter, alice);
      rounds[protocol].push(await drain(gateway, bob, protocol));
    }
  }
  submitter.close();

  const rows = (["native", "phoenix"] as const).map((protocol) => {
    const perMessage = (cpu: (r: Round) => number) =>
      median(rounds[protocol].map((r) => (cpu(r) / MESSAGES) * 1e6));
    return {
      protocol,
      perSecond: median(rounds[protocol].map((r) => MESSAGES / r.seconds)),
      gatewayMicros: perMessage((r) => r.gatewayCpuSeconds),
      clientMicros: perMessage((r) => r.clientCpuSeconds),
    };
  });
  const [native, phoenix] = rows as [(typeof rows)[0], (typeof rows)[0]];
  console.log(
    `${MESSAGES} queued ~1 KB messages drained per round, ${ROUNDS} rounds per protocol, alternating; ` +
      `load average ${loadavg()[0]?.toFixed(1)}\n`,
  );
  console.log("protocol                   msgs/s (median)  gateway CPU µs/msg  client CPU µs/msg");
  console.log("-------------------------  ---------------  ------------------  -----------------");
  for (const row of rows) {
    const name = row.protocol === "native" ? "native /api/v1/ws" : "Phoenix /socket/websocket";
    console.log(
      `${name.padEnd(25)}  ${row.perSecond.toFixed(0).padStart(15)}  ${row.gatewayMicros.toFixed(1).padStart(18)}  ${row.clientMicros.toFixed(1).padStart(17)}`,
    );
  }
  console.log(
    `\nPhoenix / native: ${(phoenix.perSecond / native.perSecond).toFixed(2)}× the throughput, ` +
      `${(phoenix.gatewayMicros / native.gatewayMicros).toFixed(2)}× the gateway CPU per message, ` +
      `${(phoenix.clientMicros / native.clientMicros).toFixed(2)}× the client's`,
  );
} finally {
  await stopChild(gateway.child);
  rmSync(dataDir, { recursive: true, force: true });
}

/** Connects bob once natively and acknowledges what the handshake left in his inbox. */
async function drainHandshake(gw: GatewayProcess, agent: BenchAgent): Promise<void> {
  const before = await acknowledgedByGateway(gw.url);
  const ws = await openSocket(gw.wsUrl, agent.apiKey, acknowledgeEach);
  await acknowledgedUpTo(gw, before + 2);
  ws.close();
  await sleep(200);
}
