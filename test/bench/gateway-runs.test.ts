import { afterEach, describe, expect, it } from "vitest";
import { checkGoals, medianOf, summarizeGoals } from "../../bench/gateway/goals.js";
import type { LoadResult } from "../../bench/gateway/load.js";
import type { Row } from "../../bench/gateway/report.js";
import { positiveInteger, type RunResult, summarizeRuns } from "../../bench/gateway/runs.js";

function row(key: string, perSecond: number, serverCpuPercent: number, p99Ms = 10): Row {
  const result = {
    perSecond,
    p99Ms,
    p50Ms: p99Ms / 2,
    cpuPercent: { server: serverCpuPercent, client: 40, nats: 30 },
  } as unknown as LoadResult;
  return { key, configuration: key, path: "-", result };
}

/** A run whose ceiling does 10,000 msgs/s and whose embedded WebSocket row does `embeddedRate`. */
function runWith(embeddedRate: number, rawVerifyMicros = 60): RunResult {
  const rows = [row("http-verify", 10_000, 90, 12), row("embedded-ws", embeddedRate, embeddedRate / 100, 12)];
  const goals = checkGoals(rows, rawVerifyMicros);
  const reported = rows.map(({ key, result }) => ({
    key,
    msgsPerSecond: result.perSecond,
    serverCpuMicrosPerMessage: ((result.cpuPercent.server ?? 0) * 10_000) / result.perSecond,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
  }));
  return { goals, rows: reported } as unknown as RunResult;
}

describe("the gateway benchmark's runs summary", () => {
  const saved = process.env.BENCH_TEST_RUNS;
  afterEach(() => {
    if (saved === undefined) delete process.env.BENCH_TEST_RUNS;
    else process.env.BENCH_TEST_RUNS = saved;
  });

  it("takes the median of odd and even counts, and none of nothing", () => {
    expect(medianOf([3, 1, 2])).toBe(2);
    expect(medianOf([4, 1, 3, 2])).toBe(2.5);
    expect(medianOf([])).toBeNaN();
  });

  it("judges each goal by the median of the runs' ratios, not by any one run", () => {
    // Ratios 0.90, 0.80, 0.86 against a goal of ≥ 0.85: the median 0.86 meets it.
    const summary = summarizeRuns([runWith(9_000), runWith(8_000), runWith(8_600)]);
    const rate = summary.goals.find((goal) => goal.goal.startsWith("embedded-ws: msgs/s"));
    expect(rate?.runs.map((value) => value.toFixed(2))).toEqual(["0.90", "0.80", "0.86"]);
    expect(rate?.median).toBeCloseTo(0.86, 5);
    expect(rate?.met).toBe(true);
    // 100 µs/msg against 60 µs verifies is 1.67× in every run: ≤ 2.5× is met; a bound "at most" too.
    const cpu = summary.goals.find((goal) => goal.goal.startsWith("embedded WS: server CPU"));
    expect(cpu?.direction).toBe("at most");
    expect(cpu?.median).toBeCloseTo(100 / 60, 5);
    expect(cpu?.met).toBe(true);
    expect(summary.figures.find((f) => f.key === "embedded-ws" && f.figure === "msgsPerSecond")?.median).toBe(
      8_600,
    );
  });

  it("misses a goal when the median misses it, even if one run met it", () => {
    const summary = summarizeGoals([runWith(9_000).goals, runWith(8_000).goals, runWith(8_100).goals]);
    const rate = summary.find((goal) => goal.goal.startsWith("embedded-ws: msgs/s"));
    expect(rate?.median).toBeCloseTo(0.81, 5);
    expect(rate?.met).toBe(false);
  });

  it("refuses a run count that is not a positive integer, naming the variable", () => {
    process.env.BENCH_TEST_RUNS = "three";
    expect(() => positiveInteger("BENCH_TEST_RUNS", 1)).toThrow(
      'BENCH_TEST_RUNS must be a positive integer, got "three"',
    );
    process.env.BENCH_TEST_RUNS = "0";
    expect(() => positiveInteger("BENCH_TEST_RUNS", 1)).toThrow(/positive integer/);
    process.env.BENCH_TEST_RUNS = "3";
    expect(positiveInteger("BENCH_TEST_RUNS", 1)).toBe(3);
    delete process.env.BENCH_TEST_RUNS;
    expect(positiveInteger("BENCH_TEST_RUNS", 1)).toBe(1);
  });
});
