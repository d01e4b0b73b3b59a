/**
 * Several runs of the gateway benchmark, summarised: each goal as the median of the runs' ratios,
 * each ratio taken within its own run (the machine's speed drifts between runs).
 */
import { type GoalCheck, type GoalSummary, medianOf, printGoalSummary, summarizeGoals } from "./goals.js";
import type { printReport } from "./report.js";
import type { ProfileSummary } from "./profile.js";

type ReportedRow = ReturnType<typeof printReport>["rows"][number];

export interface RunResult {
  date: string;
  loadAverage: number[];
  rows: ReportedRow[];
  goal: ReturnType<typeof printReport>["goal"];
  rawVerifyMicros: number;
  goals: GoalCheck[];
  profiles: Record<string, ProfileSummary>;
}

/** One configuration's figure across the runs. */
export interface FigureSummary {
  key: string;
  figure: "msgsPerSecond" | "serverCpuMicrosPerMessage" | "p50Ms" | "p99Ms";
  median: number;
  runs: number[];
}

export interface RunsSummary {
  runs: number;
  goals: GoalSummary[];
  figures: FigureSummary[];
}

/** The figures worth a median: rate and CPU for the loaded rows, latency and CPU for round trips. */
function figuresOf(key: string): FigureSummary["figure"][] {
  return key.endsWith("-rt")
    ? ["p50Ms", "p99Ms", "serverCpuMicrosPerMessage"]
    : ["msgsPerSecond", "serverCpuMicrosPerMessage"];
}

export function summarizeRuns(runs: RunResult[]): RunsSummary {
  const keys = [...new Set(runs.flatMap((run) => run.rows.map((row) => row.key)))];
  const figures = keys.flatMap((key) =>
    figuresOf(key).map((figure) => {
      const values = runs.flatMap((run) => {
        const row = run.rows.find((candidate) => candidate.key === key);
        return row && Number.isFinite(row[figure]) ? [row[figure]] : [];
      });
      return { key, figure, median: medianOf(values), runs: values };
    }),
  );
  return { runs: runs.length, goals: summarizeGoals(runs.map((run) => run.goals)), figures };
}

const LABELS: Record<FigureSummary["figure"], string> = {
  msgsPerSecond: "msgs/s",
  serverCpuMicrosPerMessage: "server CPU µs/msg (µs/trip for round trips)",
  p50Ms: "p50 ms",
  p99Ms: "p99 ms",
};

export function printRunsSummary(summary: RunsSummary): void {
  console.log(`\n=== summary of ${summary.runs} runs ===`);
  printGoalSummary(summary.goals, summary.runs);
  console.log(`\nfigures, median (runs):`);
  const digits = (figure: FigureSummary["figure"]) => (figure === "p50Ms" || figure === "p99Ms" ? 2 : 0);
  for (const { key, figure, median, runs } of summary.figures) {
    const format = (value: number) => value.toFixed(digits(figure));
    console.log(`  ${key.padEnd(14)} ${LABELS[figure]}: ${format(median)} (${runs.map(format).join(", ")})`);
  }
}

/** An environment variable that must be a positive integer, or the benchmark stops with a clear message. */
export function positiveInteger(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer, got "${text}"`);
  return value;
}
