/**
 * The aged-store measurements on NATS JetStream: a `nats-server -js` started here, empty with the
 * same agents, then holding the embedded week replayed (fill-replay.ts) and the same relay audit
 * logs as the fill wrote them. The purge is the inbox stream's `max_age` at work inside
 * nats-server: JetStream stamps its own times, so a replayed week is minutes old, and the stream's
 * max_age is set (as a gateway started with a shorter retention sets it) to the age of the first
 * message of the week's second day, while the relay runs. What does not apply: `acp audit verify` (the same logs as the
 * embedded run).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, nanos } from "@nats-io/transport-node";
import { INBOX_STREAM } from "../../src/broker/nats/layout.js";
import { MaxAgeLowering } from "../../src/broker/nats/max-age.js";
import { findNatsServer, freePort, startNatsServer, stopChild } from "../gateway/processes.js";
import type { Manifest } from "./fill.js";
import { BenchGateway, rssOfPid } from "./gateway.js";
import { flushDirtyPages, measureStore } from "./main.js";
import { measureRelay, type RelayWatch, relayPair, SECONDS, WARMUP_SECONDS } from "./measure.js";
import { profileNats } from "./pprof.js";
import type { BrokerFigures, PurgeFigures, StoreFigures } from "./report.js";
import { bytesUnder, readManifest, registerAll, runFill } from "./stores.js";

/** AGED_NATS_PROFILE=<directory>: a CPU profile of nats-server over each relay window, saved there (pprof.ts). */
const PROFILE_DIR = process.env.AGED_NATS_PROFILE;

/** A nats-server started here: its URL, its pid, and its pprof port when profiled. */
interface BenchNats {
  url: string;
  pid: number;
  profilePort?: number;
}

async function withNats<T>(storeDir: string, work: (nats: BenchNats) => Promise<T>): Promise<T> {
  const binary = findNatsServer();
  if (!binary) throw new Error("nats-server is not installed (AGED_BROKERS=embedded skips NATS)");
  mkdirSync(storeDir, { recursive: true });
  if (process.env.GOGC && !process.env.GOMEMLIMIT) {
    console.log(
      "  GOGC is set without GOMEMLIMIT: nats-server's heap has no bound (at 2,000,000 messages with GOGC=400 it reached the machine's memory while expiring a day)",
    );
  }
  const profilePort = PROFILE_DIR ? await freePort() : undefined;
  const nats = await startNatsServer(
    binary,
    storeDir,
    profilePort === undefined ? [] : ["--profile", String(profilePort)],
  );
  try {
    return await work({ url: nats.url, pid: nats.child.pid as number, profilePort });
  } finally {
    await stopChild(nats.child, 30_000);
  }
}

/**
 * The NATS aged store's gateway data directory. main.ts copies the week's relay audit logs into it
 * right after the fill, before the embedded measurements append their own relay traffic to the
 * embedded store's logs; the first start on NATS indexes them, as on embedded.
 */
export function natsAgedData(dir: string): string {
  return join(dir, "nats-data");
}

/** Messages the inbox stream holds. */
async function inboxMessages(url: string): Promise<number> {
  const nc = await connect({ servers: url });
  try {
    return (await (await jetstreamManager(nc)).streams.info(INBOX_STREAM)).state.messages;
  } finally {
    await nc.close();
  }
}

async function measureOn(
  nats: BenchNats,
  data: string,
  store: "empty" | "aged",
  manifest: (gateway: BenchGateway) => Promise<Manifest>,
): Promise<StoreFigures> {
  const gateway = await BenchGateway.start({ data, nats: { servers: nats.url } });
  const { profilePort } = nats;
  const profileDir = PROFILE_DIR;
  const watch: RelayWatch = {
    pids: { "nats-server": nats.pid },
    ...(profilePort !== undefined &&
      profileDir !== undefined && {
        // The measured part of the window, after its warm-up.
        during: async (window: number) => {
          await sleep(WARMUP_SECONDS * 1000);
          await profileNats(
            profilePort,
            SECONDS,
            join(profileDir, `nats-${store}-window${window}.pprof.gz`),
            `${store} store, window ${window}`,
          );
        },
      }),
  };
  try {
    const figures = await measureStore(gateway, await manifest(gateway), watch);
    return { ...figures, natsRssBytes: rssOfPid(nats.pid) };
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
  const empty = await withNats(join(dir, "nats-empty"), (nats) =>
    measureOn(nats, join(dir, "nats-empty-data"), "empty", (gateway) => registerAll(gateway, week)),
  );

  step("nats, aged store: the embedded week replayed into JetStream, the same relay audit logs");
  const storeDir = join(dir, "nats");
  const data = natsAgedData(dir);
  const aged = await withNats(storeDir, async (nats) => {
    const manifestFile = join(dir, "manifest-nats.json");
    await runFill("fill-replay.js", {
      natsUrl: nats.url,
      embeddedData: join(dir, "data"),
      embeddedManifest: join(dir, "manifest.json"),
      manifest: manifestFile,
    });
    const replayed = readManifest(manifestFile);
    const figures = await measureOn(nats, data, "aged", async () => replayed);
    figures.disk = {
      storeBytes: bytesUnder(join(storeDir, "jetstream")),
      auditBytes: bytesUnder(join(data, "relay-audit")) + bytesUnder(join(data, "relay-audit-index.db")),
      // The week and what the relay windows added, as the embedded figure counts its envelopes.
      messages: await inboxMessages(nats.url),
      envelopeMeanBytes: week.envelopeBytes / week.messages,
    };
    step("nats, retention of one day's worth (the inbox stream's max_age) while relaying");
    // What failed is a result too (JetStream stalled while it expired the day: reported, not thrown).
    const purge = await measurePurge(nats.url, data, replayed).catch((error: unknown) => String(error));
    return { figures, purge, fillSeconds: replayed.fillSeconds };
  });
  console.log(`  nats fill (replay): ${aged.fillSeconds.toFixed(0)} s`);
  return typeof aged.purge === "string"
    ? { empty, aged: aged.figures, purgeFailure: aged.purge }
    : { empty, aged: aged.figures, purge: aged.purge };
}

/**
 * When the relay's timed window starts, the inbox stream's max_age becomes the age of the first
 * message of the week's second day (the replay wrote the week in order, a seventh of it per day):
 * nats-server expires the first day. It is lowered the way the broker lowers a stream's max_age
 * after a start with a shorter retention (MaxAgeLowering: steps of at most 1,000 messages expired,
 * on a connection of its own), since nats-server expires what each update makes due inside it, one
 * message at a time, each removal told to every consumer of the stream. The window ends once the
 * stream's first message is past the first day; how long the lowering took is reported (even when
 * the relay failed meanwhile).
 */
async function measurePurge(url: string, data: string, week: Manifest): Promise<PurgeFigures> {
  const nc = await connect({ servers: url });
  const gateway = await BenchGateway.start({ data, nats: { servers: url } });
  let loweringMs: number | undefined;
  let lowering: MaxAgeLowering | undefined;
  try {
    const jsm = await jetstreamManager(nc);
    const before = (await jsm.streams.info(INBOX_STREAM)).state.first_seq;
    const secondDay = before + Math.floor(week.messages / 7);
    flushDirtyPages();
    const pair = await relayPair(gateway, week);
    await gateway.loopDelay(true);
    let started: number | undefined;
    let seconds = 0;
    const relay = await measureRelay(gateway, pair, {
      maxMs: 30 * 60_000,
      done: async () => {
        if (started === undefined) {
          started = performance.now();
          const { config } = await jsm.streams.info(INBOX_STREAM);
          const kept = await jsm.streams.getMessage(INBOX_STREAM, { seq: secondDay });
          if (!kept) throw new Error(`the inbox stream has no message ${secondDay}`);
          const maxAge = nanos(Date.now() - kept.time.getTime());
          const settings = {
            ...config,
            max_age: maxAge,
            duplicate_window: Math.min(config.duplicate_window, maxAge),
          };
          lowering = new MaxAgeLowering(
            [{ settings, from: config.max_age }],
            () => connect({ servers: url }),
            {
              notice: () => undefined,
              warn: (line) => console.error(line),
            },
          );
          await lowering.done;
          loweringMs = performance.now() - started;
        }
        if ((await jsm.streams.info(INBOX_STREAM)).state.first_seq < secondDay) return false;
        seconds = (performance.now() - started) / 1000;
        return true;
      },
    });
    const loop = await gateway.loopDelay(true);
    const after = (await jsm.streams.info(INBOX_STREAM)).state.first_seq;
    return {
      messages: after - before,
      seconds,
      relay,
      loopDelayMaxMs: loop.maxMs,
      readyMs: gateway.readyMs,
      ...(loweringMs === undefined ? {} : { maxAgeLoweringMs: loweringMs }),
    };
  } catch (error) {
    // The relay failed (JetStream stalled): how long the lowering had taken is the figure that says why.
    await lowering?.stop();
    const took =
      loweringMs === undefined ? "" : ` (the max_age lowering took ${(loweringMs / 1000).toFixed(1)} s)`;
    throw new Error(`${String(error)}${took}`);
  } finally {
    await gateway.stop();
    await nc.close();
  }
}
