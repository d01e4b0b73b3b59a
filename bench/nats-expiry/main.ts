/**
 * `npm run bench -- nats-expiry`: what a lower `max_age` costs nats-server on a stream shaped like
 * the gateway's inbox stream (one durable consumer per agent, each filtered to its agent's subject).
 * The stream holds NATS_EXPIRY_MESSAGES 1 KB messages (default 20,000) spread over the consumers,
 * published as fast as nats-server takes them or at NATS_EXPIRY_RATE a second (a backlog that ages
 * the way traffic at that rate does); its max_age is then lowered so that all of them are due.
 * nats-server 2.9 expires them inside the update request, one message at a time, telling every
 * consumer of the stream about each removal: the update's answer time is the expiry's length.
 * Meanwhile two publishers send a message every 5 ms, one on the connection that sent the update and
 * one on a connection of its own: the longest each waited says whom the expiry holds up. Then the
 * same again, lowered the way the broker lowers a stream's max_age after start (max-age.ts: paced
 * steps on a connection of its own), and in the same steps without the rests (`unpaced`). Each
 * way's nats-server CPU during the expiry is reported against its length: the share of a core the
 * expiry took. Messages that age past a step's max_age during a rest are expired by nats-server's
 * own timer, so the rests leave nats-server idle only when the backlog was written more slowly than
 * nats-server expires it. Each consumer count in NATS_EXPIRY_CONSUMERS (default 1,10,100,1000) and
 * each way in NATS_EXPIRY_WAYS (default update,steps) gets its own nats-server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, nanos } from "@nats-io/transport-node";
import { DEFAULT_PACING, MaxAgeLowering, type StepPacing } from "../../src/broker/nats/max-age.js";
import { cpuSecondsOf, findNatsServer, startNatsServer, stopChild } from "../gateway/processes.js";

const MESSAGES = Number(process.env.NATS_EXPIRY_MESSAGES ?? 20_000);
const CONSUMERS = (process.env.NATS_EXPIRY_CONSUMERS ?? "1,10,100,1000").split(",").map(Number);
/** NATS_EXPIRY_STEP_MS and NATS_EXPIRY_REST: how long each step is meant to take, and the rest after it as a multiple of that (default the broker's). */
const PACING: StepPacing = {
  ...DEFAULT_PACING,
  stepMs: Number(process.env.NATS_EXPIRY_STEP_MS ?? DEFAULT_PACING.stepMs),
  restPerStep: Number(process.env.NATS_EXPIRY_REST ?? DEFAULT_PACING.restPerStep),
};
/** NATS_EXPIRY_RATE: the backlog's messages a second as it is published (default 0: as fast as taken). */
const RATE = Number(process.env.NATS_EXPIRY_RATE ?? 0);
/** NATS_EXPIRY_WAYS: `update`, `steps` and `unpaced` (default the first two). */
const WAYS = (process.env.NATS_EXPIRY_WAYS ?? "update,steps").split(",") as Way[];
const DAY_MS = 24 * 3_600_000;
/** The answer to the update comes after the expiry: far longer than a request's usual 5 s. */
const TIMEOUT_MS = 30 * 60_000;

/** One update of the whole backlog on the bench's connection, or the broker's steps on a connection of their own, with or without their rests. */
type Way = "update" | "steps" | "unpaced";

interface Expiry {
  consumers: number;
  way: Way;
  expiryMs: number;
  /** nats-server's CPU time during the expiry. */
  serverCpuMs: number;
  /** Longest publish meanwhile on the bench's connection (which sends the single update), and on another one. */
  sameConnectionMs: number;
  otherConnectionMs: number;
  left: number;
}

async function expire(binary: string, consumers: number, way: Way): Promise<Expiry> {
  const dir = mkdtempSync(join(tmpdir(), "acp-bench-nats-expiry-"));
  const nats = await startNatsServer(binary, dir);
  const nc = await connect({ servers: nats.url });
  const other = await connect({ servers: nats.url });
  try {
    const jsm = await jetstreamManager(nc, { timeout: TIMEOUT_MS });
    const js = jetstream(nc, { timeout: TIMEOUT_MS });
    await jsm.streams.add({
      name: "INBOX",
      subjects: ["agent.*.inbox"],
      max_age: nanos(7 * DAY_MS),
      duplicate_window: nanos(10 * 60_000),
      allow_direct: true,
    });
    for (let c = 0; c < consumers; c++)
      await jsm.consumers.add("INBOX", {
        durable_name: `agent-${c}`,
        filter_subject: `agent.${c}.inbox`,
        ack_policy: AckPolicy.Explicit,
      });
    const body = new Uint8Array(1024);
    const batchSize = RATE > 0 ? Math.max(1, Math.round(RATE / 20)) : 500;
    const publishStarted = performance.now();
    for (let sent = 0; sent < MESSAGES; sent += batchSize) {
      const batch = [];
      for (let i = sent; i < Math.min(MESSAGES, sent + batchSize); i++)
        batch.push(js.publish(`agent.${i % consumers}.inbox`, body));
      await Promise.all(batch);
      const aheadMs =
        RATE > 0 ? ((sent + batchSize) * 1000) / RATE - (performance.now() - publishStarted) : 0;
      if (aheadMs > 0) await new Promise((resolve) => setTimeout(resolve, aheadMs));
    }
    // Old enough to be due at a max_age of one second.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    let publishing = true;
    const publisher = async (through: ReturnType<typeof jetstream>) => {
      let longest = 0;
      while (publishing) {
        const started = performance.now();
        await through.publish("agent.0.inbox", body);
        longest = Math.max(longest, performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return longest;
    };
    const publishers = [publisher(js), publisher(jetstream(other, { timeout: TIMEOUT_MS }))];
    const { config } = await jsm.streams.info("INBOX");
    const settings = { ...config, max_age: nanos(1_000), duplicate_window: nanos(1_000) };
    const serverPid = nats.child.pid ?? 0;
    const cpuBefore = cpuSecondsOf(serverPid);
    const started = performance.now();
    if (way === "update") await jsm.streams.update("INBOX", settings);
    else {
      const lowering = new MaxAgeLowering(
        [{ settings, from: config.max_age }],
        () => connect({ servers: nats.url }),
        { notice: () => undefined, warn: (line) => console.error(line) },
        way === "unpaced" ? { ...PACING, restPerStep: 0 } : PACING,
      );
      await lowering.done;
    }
    const expiryMs = performance.now() - started;
    const serverCpuMs = (cpuSecondsOf(serverPid) - cpuBefore) * 1000;
    publishing = false;
    const [sameConnectionMs, otherConnectionMs] = (await Promise.all(publishers)) as [number, number];
    const left = (await jsm.streams.info("INBOX")).state.messages;
    return { consumers, way, expiryMs, serverCpuMs, sameConnectionMs, otherConnectionMs, left };
  } finally {
    await other.close();
    await nc.close();
    await stopChild(nats.child, 30_000);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const binary = findNatsServer();
  if (!binary) throw new Error("nats-server is not installed");
  console.log(
    `expiring ${MESSAGES.toLocaleString("en-US")} messages of 1 KB by lowering max_age, published ${RATE > 0 ? `at ${RATE}/s` : "as fast as taken"} (load average ${loadavg()[0]?.toFixed(1)})`,
  );
  console.log(
    "| consumers | lowered by | expiry | per message | nats-server CPU (share of a core) | longest publish meanwhile: the bench's connection | another connection |",
  );
  console.log("| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
  for (const consumers of CONSUMERS) {
    for (const way of WAYS) {
      const { expiryMs, serverCpuMs, sameConnectionMs, otherConnectionMs, left } = await expire(
        binary,
        consumers,
        way,
      );
      if (left > MESSAGES / 10) throw new Error(`${left} messages left after the expiry`);
      const by =
        way === "update"
          ? "one update on the bench's connection"
          : way === "steps"
            ? `steps of ~${PACING.stepMs} ms, resting ${PACING.restPerStep}× each, on a connection of their own`
            : `steps of ~${PACING.stepMs} ms without rests, on a connection of their own`;
      console.log(
        `| ${consumers.toLocaleString("en-US")} | ${by} | ${(expiryMs / 1000).toFixed(2)} s | ${((1000 * expiryMs) / MESSAGES).toFixed(0)} µs | ${(serverCpuMs / 1000).toFixed(2)} s (${Math.round((100 * serverCpuMs) / expiryMs)} %) | ${(sameConnectionMs / 1000).toFixed(3)} s | ${(otherConnectionMs / 1000).toFixed(3)} s |`,
      );
    }
  }
  console.log(
    `load average at the end ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
