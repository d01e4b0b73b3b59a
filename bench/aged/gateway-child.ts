/**
 * The gateway under test, in its own process (forked with `--expose-gc` and an IPC channel): what
 * `acp gateway` starts (`startDefaultGateway`, everything at its defaults, relay audit log on),
 * plus the two settings the CLI does not offer: retention, and the rate limit lifted. It tells the
 * benchmark when it is ready (`performance.now()` then is the time since the process started,
 * module loading included) and answers, over IPC, for its event-loop delay (perf_hooks'
 * `monitorEventLoopDelay`: the longest time the loop was held), its RSS after a full GC, and how
 * far the embedded broker's retention sweep has come; and runs the broker's retention sweep with a
 * shorter retention on request (the purge measured while the relay runs), with how long each of its
 * batches held the event loop.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { EmbeddedBroker } from "../../src/broker/embedded/broker.js";
import { RetentionSweep } from "../../src/broker/embedded/retention.js";
import type { NatsConnectionOptions } from "../../src/broker/index.js";
import { startDefaultGateway } from "../../src/server.js";

export interface ChildConfig {
  data: string;
  nats?: NatsConnectionOptions;
  retentionMs?: number;
}

export type ChildRequest =
  | { type: "loop-delay"; reset: boolean }
  | { type: "rss" }
  | { type: "sweep" }
  | { type: "purge"; retentionMs: number };

export type ChildMessage =
  | { type: "ready"; url: string; readyMs: number }
  | { type: "loop-delay"; maxMs: number; p99Ms: number }
  | { type: "rss"; bytes: number }
  | { type: "sweep"; expiredThroughSeq: number | null }
  | { type: "purge"; ms: number; batches: number[]; statements: number[] };

const send = (message: ChildMessage) => process.send?.(message);

async function main(config: ChildConfig): Promise<void> {
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const gateway = await startDefaultGateway({
    data: config.data,
    port: 0,
    ...(config.nats ? { nats: config.nats } : {}),
    ...(config.retentionMs !== undefined ? { retentionMs: config.retentionMs } : {}),
    limits: { ratePerSecond: 1_000_000_000, burst: 2_000_000_000 },
  });
  send({ type: "ready", url: gateway.url, readyMs: performance.now() });
  process.on("message", (request: ChildRequest) => {
    switch (request.type) {
      case "loop-delay":
        send({ type: "loop-delay", maxMs: loop.max / 1e6, p99Ms: loop.percentile(99) / 1e6 });
        if (request.reset) loop.reset();
        break;
      case "rss":
        (globalThis as { gc?: () => void }).gc?.();
        setTimeout(() => send({ type: "rss", bytes: process.memoryUsage().rss }), 500);
        break;
      case "purge": {
        // The broker's own sweep, as a shorter retention would run it: batches, commits, pauses.
        const broker = gateway.broker as EmbeddedBroker;
        const started = performance.now();
        const batches: number[] = [];
        const statements: number[] = [];
        const sweep = new RetentionSweep(
          broker.table,
          broker.commits,
          { ...broker.policy, retentionMs: request.retentionMs },
          {
            dropped: () => undefined,
            settled: () => undefined,
            inboxOpen: () => true,
            batched: (heldMs, sweptMs) => {
              batches.push(heldMs);
              statements.push(sweptMs);
            },
          },
          (warning) => console.error(warning),
        );
        void sweep
          .sweep()
          .then(() => sweep.stop())
          .then(() => send({ type: "purge", ms: performance.now() - started, batches, statements }));
        break;
      }
      case "sweep": {
        const table = (gateway.broker as { table?: { expiredThroughSeq?(): number } }).table;
        send({ type: "sweep", expiredThroughSeq: table?.expiredThroughSeq?.() ?? null });
        break;
      }
    }
  });
  process.once("SIGTERM", () => {
    void gateway.close().then(() => process.exit(0));
  });
}

main(JSON.parse(process.argv[2] ?? "{}") as ChildConfig).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
