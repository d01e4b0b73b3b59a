/**
 * The gateway's goals, as ratios inside one run: the gateway's cost per message against one raw
 * Ed25519 verify and against the plain node:http + verify ceiling, NATS against embedded, and the
 * tail latency against the ceiling's.
 */
import { generateKeyPairSync, sign, verify } from "node:crypto";
import type { Row } from "./report.js";

/** CPU µs of one raw node:crypto Ed25519 verify of ~1 KB in this process (median of 5 rounds). */
export function measureRawVerifyMicros(bytes = 1024): number {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const data = Buffer.alloc(bytes, 7);
  const signature = sign(null, data, privateKey);
  for (let i = 0; i < 500; i++) verify(null, data, publicKey, signature);
  const rounds: number[] = [];
  for (let round = 0; round < 5; round++) {
    const before = process.cpuUsage();
    for (let i = 0; i < 1000; i++) verify(null, data, publicKey, signature);
    const used = process.cpuUsage(before);
    rounds.push((used.user + used.system) / 1000);
  }
  return rounds.sort((a, b) => a - b)[2] ?? Number.NaN;
}

export interface GoalCheck {
  goal: string;
  /** The goal's ratio in this run, and the bound it must stay within. */
  value: number;
  target: number;
  direction: "at most" | "at least";
  /** Absolute figures behind the ratio, for people. */
  detail: string;
  met: boolean;
}

const cpuPerMessage = (row: Row, name: string) =>
  ((row.result.cpuPercent[name] ?? Number.NaN) * 10_000) / row.result.perSecond;

function check(
  goal: string,
  value: number,
  target: number,
  direction: GoalCheck["direction"],
  detail = "",
): GoalCheck {
  const met = direction === "at most" ? value <= target : value >= target;
  return { goal, value, target, direction, detail, met };
}

export function checkGoals(rows: Row[], rawVerifyMicros: number): GoalCheck[] {
  const find = (key: string) => rows.find((row) => row.key === key);
  const ceiling = find("http-verify");
  const embeddedWs = find("embedded-ws");
  const embeddedHttp = find("embedded-http");
  const natsWs = find("nats-ws");
  const checks: GoalCheck[] = [];
  if (embeddedWs) {
    const micros = cpuPerMessage(embeddedWs, "server");
    checks.push(
      check(
        "embedded WS: server CPU/msg ≤ 2.5 × one raw verify",
        micros / rawVerifyMicros,
        2.5,
        "at most",
        `${micros.toFixed(0)} vs ${rawVerifyMicros.toFixed(0)} µs`,
      ),
    );
  }
  if (ceiling) {
    const base = ceiling.result;
    for (const [row, target] of [
      [embeddedWs, 0.85],
      [embeddedHttp, 0.7],
    ] as const) {
      if (!row) continue;
      checks.push(
        check(
          `${row.key}: msgs/s ≥ ${target} × http+verify`,
          row.result.perSecond / base.perSecond,
          target,
          "at least",
          `${Math.round(row.result.perSecond)} vs ${Math.round(base.perSecond)} msgs/s`,
        ),
      );
    }
    if (embeddedWs) {
      checks.push(
        check(
          "embedded-ws: p99 ≤ 1.5 × http+verify p99",
          embeddedWs.result.p99Ms / base.p99Ms,
          1.5,
          "at most",
          `${embeddedWs.result.p99Ms.toFixed(1)} vs ${base.p99Ms.toFixed(1)} ms`,
        ),
      );
    }
  }
  if (natsWs && embeddedWs) {
    checks.push(
      check(
        "nats-ws: msgs/s ≥ 0.7 × embedded-ws",
        natsWs.result.perSecond / embeddedWs.result.perSecond,
        0.7,
        "at least",
        `${Math.round(natsWs.result.perSecond)} vs ${Math.round(embeddedWs.result.perSecond)} msgs/s`,
      ),
    );
    checks.push(
      check(
        "nats-ws: gateway CPU/msg ≤ 1.3 × embedded-ws",
        cpuPerMessage(natsWs, "server") / cpuPerMessage(embeddedWs, "server"),
        1.3,
        "at most",
        `${cpuPerMessage(natsWs, "server").toFixed(0)} vs ${cpuPerMessage(embeddedWs, "server").toFixed(0)} µs; ` +
          `nats-server ${cpuPerMessage(natsWs, "nats").toFixed(0)} µs/msg beside it`,
      ),
    );
  }
  return checks;
}

export function printGoals(checks: GoalCheck[], rawVerifyMicros: number): void {
  if (checks.length === 0) return;
  console.log(`\ngoals (one raw Ed25519 verify here: ${rawVerifyMicros.toFixed(0)} µs CPU):`);
  for (const check of checks) {
    console.log(
      `  ${check.met ? "met    " : "NOT met"}  ${check.goal}: ${check.value.toFixed(2)}× (goal ${check.target}×)` +
        (check.detail ? `: ${check.detail}` : ""),
    );
  }
}

/** One goal over several runs: the issue asks for the median of the runs' ratios. */
export interface GoalSummary {
  goal: string;
  target: number;
  direction: GoalCheck["direction"];
  median: number;
  runs: number[];
  met: boolean;
}

/** Medians goal by goal; a goal missing from some run (a configuration that failed) uses the runs that have it. */
export function summarizeGoals(runs: GoalCheck[][]): GoalSummary[] {
  const byGoal = new Map<string, GoalCheck[]>();
  for (const run of runs)
    for (const check of run) byGoal.set(check.goal, [...(byGoal.get(check.goal) ?? []), check]);
  return [...byGoal].map(([goal, checks]) => {
    const first = checks[0] as GoalCheck;
    const values = checks.map((check) => check.value);
    const median = medianOf(values);
    return {
      goal,
      target: first.target,
      direction: first.direction,
      median,
      runs: values,
      met: first.direction === "at most" ? median <= first.target : median >= first.target,
    };
  });
}

/** The middle value; for an even count, the mean of the two middle ones. */
export function medianOf(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function printGoalSummary(summaries: GoalSummary[], runCount: number): void {
  if (summaries.length === 0) return;
  console.log(`\ngoals, median of ${runCount} runs (each ratio within its own run):`);
  for (const summary of summaries) {
    const runs = summary.runs.map((value) => value.toFixed(2)).join(", ");
    console.log(
      `  ${summary.met ? "met    " : "NOT met"}  ${summary.goal}: ${summary.median.toFixed(2)}× (runs ${runs}; goal ${summary.target}×)`,
    );
  }
}
