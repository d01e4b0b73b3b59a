/** The gateway benchmark's printed table, goal verdict and hot spots, and the rows written to JSON. */
import type { LoadResult } from "./load.js";
import type { ProfileSummary } from "./profile.js";

export interface Row {
  /** a2a | http-verify | embedded-ws | embedded-http | nats-ws | nats-http */
  key: string;
  configuration: string;
  path: string;
  result: LoadResult;
}

/** The goal for the embedded broker. */
export const GOAL = { msgsPerSecond: 8000, p99Ms: 20 };

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : "-");
/** Server CPU time per message: steadier than msgs/s on a busy machine, and what bounds msgs/s on a quiet one. */
const cpuMicrosPerMessage = (result: LoadResult, name: string) =>
  ((result.cpuPercent[name] ?? Number.NaN) * 10_000) / result.perSecond;
const ratio = (value: number, base: number | undefined) => (base ? `${(value / base).toFixed(2)}×` : "-");

function textTable(header: string[], lines: string[][], rightAligned: Set<number>): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...lines.map((line) => (line[column] ?? "").length)),
  );
  const render = (cells: string[]) =>
    cells
      .map((cell, column) =>
        rightAligned.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0),
      )
      .join("  ");
  return [render(header), widths.map((w) => "-".repeat(w)).join("  "), ...lines.map(render)].join("\n");
}

export function printReport(rows: Row[], profiles: Record<string, ProfileSummary>) {
  const a2a = rows.find((row) => row.key === "a2a")?.result.perSecond;
  const plain = rows.find((row) => row.key === "http-verify")?.result.perSecond;
  const json = rows.map(({ key, configuration, path, result }) => ({
    key,
    configuration,
    submitPath: path,
    msgsPerSecond: Math.round(result.perSecond),
    completed: result.completed,
    seconds: Number(result.seconds.toFixed(3)),
    p50Ms: Number(result.p50Ms.toFixed(3)),
    p99Ms: Number(result.p99Ms.toFixed(3)),
    maxMs: Number(result.maxMs.toFixed(3)),
    ratioVsA2a: a2a ? Number((result.perSecond / a2a).toFixed(3)) : null,
    ratioVsHttpVerify: plain ? Number((result.perSecond / plain).toFixed(3)) : null,
    serverCpuMicrosPerMessage: Math.round(cpuMicrosPerMessage(result, "server")),
    clientCpuMicrosPerMessage: Math.round(cpuMicrosPerMessage(result, "client")),
    cpuPercent: Object.fromEntries(
      Object.entries(result.cpuPercent).map(([name, value]) => [name, Math.round(value)]),
    ),
    waitPercent: Object.fromEntries(
      Object.entries(result.waitPercent).map(([name, value]) => [name, Math.round(value)]),
    ),
  }));

  const header = [
    "configuration",
    "submit path",
    "msgs/s",
    "p50 ms",
    "p99 ms",
    "vs A2A",
    "vs http+verify",
    "CPU % client/server[/nats]",
    "server CPU µs/msg",
    "server waiting for CPU %",
  ];
  const isRoundTrip = (row: Row) => row.key.endsWith("-rt");
  const lines = rows
    .filter((row) => !isRoundTrip(row))
    .map(({ configuration, path, result }) => [
      configuration,
      path,
      Math.round(result.perSecond).toLocaleString("en-US"),
      fixed(result.p50Ms, 2),
      fixed(result.p99Ms, 2),
      ratio(result.perSecond, a2a),
      ratio(result.perSecond, plain),
      [result.cpuPercent.client, result.cpuPercent.server, result.cpuPercent.nats]
        .filter((v): v is number => v !== undefined)
        .map((v) => Math.round(v))
        .join("/"),
      fixed(cpuMicrosPerMessage(result, "server"), 0),
      fixed(result.waitPercent.server ?? Number.NaN, 0),
    ]);
  console.log(`\n${textTable(header, lines, new Set([2, 3, 4, 5, 6, 7, 8, 9]))}`);
  console.log(
    "\nlatency: ACP rows = submit sent → new_message received by the recipient (acknowledged right after); " +
      "peers = request sent → response received. CPU % is of one core over the timed window. " +
      "Server waiting for CPU = share of the window its event loop was runnable while another process " +
      "had the CPU (/proc/<pid>/schedstat): above a few %, the machine is busy and rates say little.",
  );

  printRoundTrips(rows.filter(isRoundTrip));

  const embedded = rows.filter((row) => row.key.startsWith("embedded-") && !isRoundTrip(row));
  const goal = embedded.map(({ key, result }) => ({
    key,
    met: result.perSecond >= GOAL.msgsPerSecond && result.p99Ms < GOAL.p99Ms,
  }));
  for (const { key, met } of goal) {
    console.log(
      `goal (embedded ≥ ${GOAL.msgsPerSecond.toLocaleString("en-US")} msgs/s, p99 < ${GOAL.p99Ms} ms), ${key}: ${met ? "met" : "NOT met"}`,
    );
  }

  for (const [broker, profile] of Object.entries(profiles)) {
    console.log(
      `\ngateway CPU profile, ${broker} broker (self time, idle excluded; whole run incl. warm-up):`,
    );
    console.log(
      textTable(
        ["area", "self %"],
        profile.areas.map((a) => [a.area, a.selfPercent.toFixed(1)]),
        new Set([1]),
      ),
    );
    console.log("");
    console.log(
      textTable(
        ["function", "location", "self %"],
        profile.functions.map((f) => [f.function, f.location, f.selfPercent.toFixed(1)]),
        new Set([2]),
      ),
    );
  }
  return { rows: json, goal: { ...GOAL, embedded: goal } };
}

/** One request in flight: the latency of a conversation, request → response, against A2A's echo. */
function printRoundTrips(rows: Row[]): void {
  if (rows.length === 0) return;
  const a2a = rows.find((row) => row.key === "a2a-rt")?.result;
  const lines = rows.map(({ configuration, path, result }) => [
    configuration,
    path,
    Math.round(result.perSecond).toLocaleString("en-US"),
    fixed(result.p50Ms, 2),
    fixed(result.p99Ms, 2),
    a2a ? `${(result.p50Ms / a2a.p50Ms).toFixed(2)}×` : "-",
    fixed(cpuMicrosPerMessage(result, "server"), 0),
  ]);
  const header = [
    "round trip, 1 in flight",
    "path",
    "trips/s",
    "p50 ms",
    "p99 ms",
    "p50 vs A2A",
    "server CPU µs/trip",
  ];
  console.log(`\n${textTable(header, lines, new Set([2, 3, 4, 5, 6]))}`);
  console.log(
    "round trip: ACP = request submitted → response received by the requester (two signed, verified, " +
      "persisted and delivered messages, each acknowledged); A2A = sendMessage → echoed reply.",
  );
}
