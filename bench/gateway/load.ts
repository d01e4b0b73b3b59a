/**
 * The closed-loop load generator shared by every configuration: `concurrency` workers each run one
 * operation after another, so exactly that many are in flight at all times. A warm-up phase runs
 * first (JIT, connection pools, SQLite pages); only operations that complete inside the timed
 * window count, and the window is measured, not assumed.
 */
import { cpuSecondsOf, runQueueWaitNsOf } from "./processes.js";

export interface LoadOptions {
  concurrency: number;
  warmupMs: number;
  measureMs: number;
  /** Child processes whose CPU use over the timed window is reported (gateway, peer server, nats-server). */
  watch?: Record<string, number>;
  /** Ends the timed window early once this resolves true (asked every 250 ms); `measureMs` is then the longest. */
  until?: () => Promise<boolean>;
}

/** One operation; resolves with its latency in ms (as the caller defines it) once it is complete. */
export type Operation = () => Promise<number>;

export interface LoadResult {
  completed: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** CPU use over the timed window, in % of one core: `client` is this process. */
  cpuPercent: Record<string, number>;
  /** % of the window each watched process's event loop was runnable but another process had the CPU. */
  waitPercent: Record<string, number>;
}

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}

export async function runClosedLoop(operation: Operation, options: LoadOptions): Promise<LoadResult> {
  let phase: "warmup" | "measure" | "stopping" = "warmup";
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  let failure: unknown;

  const record = (ms: number) => {
    if (phase !== "measure") return;
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[count++] = ms;
  };
  const worker = async () => {
    while (phase !== "stopping" && failure === undefined) {
      try {
        record(await operation());
      } catch (err) {
        failure ??= err;
      }
    }
  };

  const workers = Array.from({ length: options.concurrency }, () => worker());
  await sleep(options.warmupMs);
  if (failure !== undefined) throw failure;

  const watch = options.watch ?? {};
  const cpuBefore = Object.fromEntries(Object.entries(watch).map(([name, pid]) => [name, cpuSecondsOf(pid)]));
  const waitBefore = Object.fromEntries(
    Object.entries(watch).map(([name, pid]) => [name, runQueueWaitNsOf(pid)]),
  );
  const clientBefore = process.cpuUsage();
  phase = "measure";
  const started = performance.now();
  if (options.until) {
    const deadline = started + options.measureMs;
    while (performance.now() < deadline && !(await options.until())) await sleep(250);
  } else {
    await sleep(options.measureMs);
  }
  phase = "stopping";
  const seconds = (performance.now() - started) / 1000;
  const completed = count;
  const clientCpu = process.cpuUsage(clientBefore);
  const cpuPercent: Record<string, number> = {
    client: ((clientCpu.user + clientCpu.system) / 1e6 / seconds) * 100,
  };
  const waitPercent: Record<string, number> = {};
  for (const [name, pid] of Object.entries(watch)) {
    cpuPercent[name] = ((cpuSecondsOf(pid) - (cpuBefore[name] ?? 0)) / seconds) * 100;
    waitPercent[name] = ((runQueueWaitNsOf(pid) - (waitBefore[name] ?? 0)) / 1e9 / seconds) * 100;
  }
  // Let the in-flight operations finish so the next configuration starts from a quiet system.
  await Promise.all(workers);
  if (failure !== undefined) throw failure;

  const sorted = latencies.slice(0, completed).sort();
  return {
    completed,
    seconds,
    perSecond: completed / seconds,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
    cpuPercent,
    waitPercent,
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
