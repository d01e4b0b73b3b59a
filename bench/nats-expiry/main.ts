/**
 * `npm run bench -- nats-expiry`: what a lower `max_age` costs nats-server on a stream shaped like
 * the gateway's inbox stream (one durable consumer per agent, each filtered to its agent's subject).
 * The stream holds NATS_EXPIRY_MESSAGES 1 KB messages (default 20,000) spread over the consumers; its
 * max_age is then lowered so that all of them are due. nats-server 2.9 expires them inside the update
 * request, one message at a time, telling every consumer of the stream about each removal: the
 * update's answer time is the expiry's length. Meanwhile two publishers send a message every 5 ms,
 * one on the connection that sent the update and one on a connection of its own: the longest each
 * waited says whom the expiry holds up. Then the same again, lowered the way the broker lowers a
 * stream's max_age after start (max-age.ts: steps of at most 1,000 messages expired, on a connection
 * of its own): the relay's connection is then one that sends no update. Each consumer count in
 * NATS_EXPIRY_CONSUMERS (default 1,10,100,1000) and each way gets its own nats-server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, nanos } from "@nats-io/transport-node";
import { DEFAULT_PACING, MaxAgeLowering, type StepPacing } from "../../src/broker/nats/max-age.js";
import { findNatsServer, startNatsServer, stopChild } from "../gateway/processes.js";

const MESSAGES = Number(process.env.NATS_EXPIRY_MESSAGES ?? 20_000);
const CONSUMERS = (process.env.NATS_EXPIRY_CONSUMERS ?? "1,10,100,1000").split(",").map(Number);
/** NATS_EXPIRY_STEP_MS and NATS_EXPIRY_REST: how long each step is meant to take, and the rest after it as a multiple of that (default the broker's). */
const PACING: StepPacing = {
  ...DEFAULT_PACING,
  stepMs: Number(process.env.NATS_EXPIRY_STEP_MS ?? DEFAULT_PACING.stepMs),
  restPerStep: Number(process.env.NATS_EXPIRY_REST ?? DEFAULT_PACING.restPerStep),
};
/** NATS_EXPIRY_WAYS: `update`, `steps` or both (default). */
const WAYS = (process.env.NATS_EXPIRY_WAYS ?? "update,steps").split(",") as Way[];
const DAY_MS = 24 * 3_600_000;
/** The answer to the update comes after the expiry: far longer than a request's usual 5 s. */
const TIMEOUT_MS = 30 * 60_000;

/** One update of the whole backlog on the bench's connection, or the broker's steps on a connection of their own. */
type Way = "update" | "steps";

interface Expiry {
  consumers: number;
  way: Way;
  expiryMs: number;
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
    for (let sent = 0; sent < MESSAGES; sent += 500) {
      const batch = [];
      for (let i = sent; i < Math.min(MESSAGES, sent + 500); i++)
        batch.push(js.publish(`agent.${i % consumers}.inbox`, body));
      await Promise.all(batch);
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
    const started = performance.now();
    if (way === "update") await jsm.streams.update("INBOX", settings);
    else {
      const lowering = new MaxAgeLowering(
        [{ settings, from: config.max_age }],
        () => connect({ servers: nats.url }),
        { notice: () => undefined, warn: (line) => console.error(line) },
        PACING,
      );
      await lowering.done;
    }
    const expiryMs = performance.now() - started;
    publishing = false;
    const [sameConnectionMs, otherConnectionMs] = (await Promise.all(publishers)) as [number, number];
    const left = (await jsm.streams.info("INBOX")).state.messages;
    return { consumers, way, expiryMs, sameConnectionMs, otherConnectionMs, left };
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
    `expiring ${MESSAGES.toLocaleString("en-US")} messages of 1 KB by lowering max_age (load average ${loadavg()[0]?.toFixed(1)})`,
  );
  console.log(
    "| consumers | lowered by | expiry | per message | longest publish meanwhile: the bench's connection | another connection |",
  );
  console.log("| ---: | --- | ---: | ---: | ---: | ---: |");
  for (const consumers of CONSUMERS) {
    for (const way of WAYS) {
      const { expiryMs, sameConnectionMs, otherConnectionMs, left } = await expire(binary, consumers, way);
      if (left > MESSAGES / 10) throw new Error(`${left} messages left after the expiry`);
      const by =
        way === "update"
          ? "one update on the bench's connection"
          : `steps of ~${PACING.stepMs} ms, resting ${PACING.restPerStep}× each, on a connection of their own`;
      console.log(
        `| ${consumers.toLocaleString("en-US")} | ${by} | ${(expiryMs / 1000).toFixed(2)} s | ${((1000 * expiryMs) / MESSAGES).toFixed(0)} µs | ${(sameConnectionMs / 1000).toFixed(3)} s | ${(otherConnectionMs / 1000).toFixed(3)} s |`,
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
