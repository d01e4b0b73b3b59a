/** The aged-store benchmark's tables and goal verdicts (printed), and the figures written to JSON. */
import type { LoadResult } from "../gateway/load.js";
import type { Latency, QueryFigures, RelayWindow } from "./measure.js";

export interface StoreFigures {
  readyMs: number;
  /** Ready → the dashboard's relay audit index has read every log (a store whose logs it had not indexed yet). */
  indexMs: number;
  /** The median of the relay windows (by rate). */
  relay: LoadResult;
  /** Each relay window's rate and CPU per message, in the order they ran. */
  relayWindows: RelayWindow[];
  roundTrip: LoadResult;
  queries: QueryFigures;
  rssBytes: number;
  /** Longest the gateway's event loop was held during the relay run (ms). */
  loopDelayMaxMs: number;
  /** Only for an aged store. */
  disk?: DiskFigures;
  natsRssBytes?: number;
}

export interface DiskFigures {
  /** The broker's own files (acp.db and its log, or the nats-server store). */
  storeBytes: number;
  /** The relay audit logs and their index. */
  auditBytes: number;
  messages: number;
  /** Mean UTF-8 size of the envelopes stored. */
  envelopeMeanBytes: number;
}

export interface PurgeFigures {
  /** Messages whose envelope the purge removed. */
  messages: number;
  seconds: number;
  /** The relay while the purge ran. */
  relay: LoadResult;
  /** Longest the gateway's event loop was held while the purge ran, by anything (the relay, GC, the purge). */
  loopDelayMaxMs: number;
  /**
   * The embedded sweep's batches: how long each held the event loop, from its first statement to
   * its commit, and the longest of the sweep's own statements in one batch (ms); none on NATS
   * (nats-server expires).
   */
  sweepBatches?: { count: number; maxMs: number; p99Ms: number; statementsMaxMs?: number };
  /** Start → ready with the purge due. */
  readyMs: number;
  /** NATS: how long the broker's lowering of max_age took (steps on a connection of its own, each expiring inside its update; ms). */
  maxAgeLoweringMs?: number;
}

export interface BrokerFigures {
  empty: StoreFigures;
  aged: StoreFigures;
  purge?: PurgeFigures;
  /** Why the purge could not be measured (NATS: JetStream did not answer while it expired the day). */
  purgeFailure?: string;
  auditVerify?: { entries: number; seconds: number; perSecond: number };
}

export interface SizeFigures {
  messages: number;
  fillSeconds: number;
  brokers: Partial<Record<"embedded" | "nats", BrokerFigures>>;
}

export const GOALS = {
  relayRate: 0.9,
  relayP99: 1.5,
  queryP99Ms: 50,
  purgeP99: 2,
  loopHoldMs: 50,
  readyMs: 5000,
  diskPerEnvelope: 2,
};

const fixed = (value: number | undefined, digits = 1) =>
  value === undefined || !Number.isFinite(value) ? "-" : value.toFixed(digits);
const count = (value: number) => Math.round(value).toLocaleString("en-US");
const ratio = (aged: number, empty: number) => (empty > 0 ? `${(aged / empty).toFixed(2)}×` : "-");

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[0] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

const latencyCells = (l: Latency | undefined) => [
  fixed(l?.p50Ms, 2),
  `${fixed(l?.p99Ms, 2)}${l?.rows === undefined ? "" : ` (${fixed(l.rows)} rows)`}`,
];

const windowRates = (store: StoreFigures) =>
  store.relayWindows.map((window) => count(window.perSecond)).join(" / ");
/** Each window's µs of CPU per message of one process. */
const windowCpu = (store: StoreFigures, process: string) =>
  store.relayWindows.map((window) => count(window.cpuMicrosPerMessage[process] ?? Number.NaN)).join(" / ");

export function printBroker(name: string, messages: number, figures: BrokerFigures): string[] {
  const { empty, aged, purge } = figures;
  const rows: string[][] = [
    [
      "relay msgs/s (64 in flight), median window",
      count(empty.relay.perSecond),
      count(aged.relay.perSecond),
      ratio(aged.relay.perSecond, empty.relay.perSecond),
    ],
    ["relay msgs/s, each window in turn", windowRates(empty), windowRates(aged), ""],
    ...Object.keys(aged.relayWindows[0]?.cpuMicrosPerMessage ?? {}).map((process) => [
      `${process} CPU µs per message relayed, each window`,
      windowCpu(empty, process),
      windowCpu(aged, process),
      "",
    ]),
    [
      "relay p50 ms",
      fixed(empty.relay.p50Ms, 2),
      fixed(aged.relay.p50Ms, 2),
      ratio(aged.relay.p50Ms, empty.relay.p50Ms),
    ],
    [
      "relay p99 ms",
      fixed(empty.relay.p99Ms, 2),
      fixed(aged.relay.p99Ms, 2),
      ratio(aged.relay.p99Ms, empty.relay.p99Ms),
    ],
    [
      "round trip p50 ms (1 in flight)",
      fixed(empty.roundTrip.p50Ms, 2),
      fixed(aged.roundTrip.p50Ms, 2),
      ratio(aged.roundTrip.p50Ms, empty.roundTrip.p50Ms),
    ],
    [
      "round trip p99 ms",
      fixed(empty.roundTrip.p99Ms, 2),
      fixed(aged.roundTrip.p99Ms, 2),
      ratio(aged.roundTrip.p99Ms, empty.roundTrip.p99Ms),
    ],
  ];
  for (const name of Object.keys(aged.queries)) {
    const [e50, e99] = latencyCells(empty.queries[name]);
    const [a50, a99] = latencyCells(aged.queries[name]);
    rows.push([
      `${name} p50 / p99 ms`,
      `${e50} / ${e99}`,
      `${a50} / ${a99}`,
      ratio(aged.queries[name]?.p99Ms ?? 0, empty.queries[name]?.p99Ms ?? 0),
    ]);
  }
  rows.push(
    ["start → ready ms", count(empty.readyMs), count(aged.readyMs), ratio(aged.readyMs, empty.readyMs)],
    ["ready → relay audit indexed ms", count(empty.indexMs), count(aged.indexMs), ""],
    [
      "gateway RSS MB (after GC)",
      fixed(empty.rssBytes / 2 ** 20),
      fixed(aged.rssBytes / 2 ** 20),
      ratio(aged.rssBytes, empty.rssBytes),
    ],
    ["event loop held, max ms (relay run)", fixed(empty.loopDelayMaxMs), fixed(aged.loopDelayMaxMs), ""],
  );
  if (aged.natsRssBytes !== undefined)
    rows.push([
      "nats-server RSS MB",
      fixed((empty.natsRssBytes ?? 0) / 2 ** 20),
      fixed(aged.natsRssBytes / 2 ** 20),
      ratio(aged.natsRssBytes, empty.natsRssBytes ?? 0),
    ]);
  const lines = [`\n${name}, ${count(messages)} messages: empty store vs aged store (same load generator)`];
  lines.push(table(["measure", "empty", "aged", "aged/empty"], rows));
  const disk = aged.disk;
  if (disk) {
    const perMessage = disk.storeBytes / disk.messages;
    lines.push(
      `disk: store ${fixed(disk.storeBytes / 2 ** 20)} MB = ${count(perMessage)} B per stored message, ` +
        `${fixed(perMessage / disk.envelopeMeanBytes, 2)}× the mean envelope (${count(disk.envelopeMeanBytes)} B); ` +
        `relay audit logs + index ${fixed(disk.auditBytes / 2 ** 20)} MB = ${count(disk.auditBytes / disk.messages)} B per message`,
    );
  }
  if (purge) {
    const batches = purge.sweepBatches;
    lines.push(
      `purge of one day (${count(purge.messages)} ${batches ? "envelopes, by the broker's sweep" : "messages, by the stream's max_age"}) ` +
        `while relaying: ${fixed(purge.seconds)} s; relay p99 ` +
        `${fixed(purge.relay.p99Ms, 2)} ms vs ${fixed(aged.relay.p99Ms, 2)} without (${ratio(purge.relay.p99Ms, aged.relay.p99Ms)}), ` +
        `${count(purge.relay.perSecond)} msgs/s; event loop held at most ${fixed(purge.loopDelayMaxMs)} ms ` +
        `(${fixed(aged.loopDelayMaxMs)} in the relay run without the purge)` +
        (batches
          ? `; the sweep's ${count(batches.count)} batches held it at most ${fixed(batches.maxMs)} ms each (p99 ${fixed(batches.p99Ms)})` +
            (batches.statementsMaxMs === undefined
              ? ""
              : `, their own statements at most ${fixed(batches.statementsMaxMs)} ms`)
          : "") +
        (purge.maxAgeLoweringMs === undefined
          ? ""
          : `; the broker's max_age lowering (in steps, on a connection of its own) took ${fixed(purge.maxAgeLoweringMs / 1000)} s`) +
        `; ready in ${count(purge.readyMs)} ms`,
    );
  }
  if (figures.purgeFailure) lines.push(`purge of one day while relaying: failed: ${figures.purgeFailure}`);
  if (figures.auditVerify) {
    const v = figures.auditVerify;
    lines.push(
      `acp audit verify: ${count(v.entries)} relay audit entries in ${fixed(v.seconds)} s = ${count(v.perSecond)} entries/s`,
    );
  }
  return lines;
}

export interface Verdict {
  goal: string;
  broker: string;
  value: string;
  met: boolean;
}

/** The issue's goals, each as measured in this run. */
export function verdicts(sizes: SizeFigures[]): Verdict[] {
  const out: Verdict[] = [];
  const largest = sizes.reduce((a, b) => (b.messages > a.messages ? b : a));
  for (const [broker, figures] of Object.entries(largest.brokers)) {
    if (!figures) continue;
    const { empty, aged, purge } = figures;
    const rate = aged.relay.perSecond / empty.relay.perSecond;
    out.push({
      goal: `relay rate aged/empty ≥ ${GOALS.relayRate}×`,
      broker,
      value: `${rate.toFixed(2)}×`,
      met: rate >= GOALS.relayRate,
    });
    const p99 = aged.relay.p99Ms / empty.relay.p99Ms;
    out.push({
      goal: `relay p99 aged/empty ≤ ${GOALS.relayP99}×`,
      broker,
      value: `${p99.toFixed(2)}×`,
      met: p99 <= GOALS.relayP99,
    });
    const worst = Object.entries(aged.queries).reduce((a, b) => (b[1].p99Ms > a[1].p99Ms ? b : a));
    out.push({
      goal: `every query p99 ≤ ${GOALS.queryP99Ms} ms at ${count(largest.messages)}`,
      broker,
      value: `worst ${worst[0]} ${worst[1].p99Ms.toFixed(1)} ms`,
      met: worst[1].p99Ms <= GOALS.queryP99Ms,
    });
    if (purge) {
      const during = purge.relay.p99Ms / aged.relay.p99Ms;
      out.push({
        goal: `relay p99 during purge ≤ ${GOALS.purgeP99}× without`,
        broker,
        value: `${during.toFixed(2)}×`,
        met: during <= GOALS.purgeP99,
      });
      // The purge's own holds: the sweep's batches. The loop's longest delay during the purge
      // (printed with it) counts whatever else held it too, and the same without a purge.
      if (purge.sweepBatches)
        out.push({
          goal: `the purge holds the event loop ≤ ${GOALS.loopHoldMs} ms at a time`,
          broker,
          value: `longest batch ${purge.sweepBatches.maxMs.toFixed(1)} ms (loop's longest delay ${purge.loopDelayMaxMs.toFixed(0)} ms, ${aged.loopDelayMaxMs.toFixed(0)} without the purge)`,
          met: purge.sweepBatches.maxMs <= GOALS.loopHoldMs,
        });
    }
    out.push({
      goal: `ready ≤ ${GOALS.readyMs / 1000} s on the aged store`,
      broker,
      value: `${(aged.readyMs / 1000).toFixed(2)} s`,
      met: aged.readyMs <= GOALS.readyMs,
    });
    if (aged.disk) {
      const perEnvelope = aged.disk.storeBytes / aged.disk.messages / aged.disk.envelopeMeanBytes;
      out.push({
        goal: `disk ≤ ${GOALS.diskPerEnvelope}× envelope bytes`,
        broker,
        value: `${perEnvelope.toFixed(2)}×`,
        met: perEnvelope <= GOALS.diskPerEnvelope,
      });
    }
  }
  const [small, large] = [...sizes].sort((a, b) => a.messages - b.messages);
  if (small && large && small !== large) {
    const allowed = Math.log(large.messages) / Math.log(small.messages);
    for (const [broker, figures] of Object.entries(large.brokers)) {
      const before = small.brokers[broker as "embedded"]?.aged.queries;
      if (!figures || !before) continue;
      for (const [name, latency] of Object.entries(figures.aged.queries)) {
        const was = before[name];
        if (!was) continue;
        const growth = latency.p99Ms / was.p99Ms;
        out.push({
          goal: `${name}: p99 ${count(small.messages)} → ${count(large.messages)} grows ≤ ${allowed.toFixed(2)}× (log)`,
          broker,
          value: `${growth.toFixed(2)}× (p50 ${(latency.p50Ms / was.p50Ms).toFixed(2)}×)`,
          met: growth <= allowed,
        });
      }
    }
  }
  return out;
}

export function printVerdicts(verdicts: Verdict[]): void {
  console.log(
    `\n${table(
      ["goal", "broker", "measured", "status"],
      verdicts.map((v) => [v.goal, v.broker, v.value, v.met ? "met" : "NOT met"]),
    )}`,
  );
}
