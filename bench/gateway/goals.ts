/**
 * Issue 15's goals, as ratios inside one run: the gateway's cost per message against one raw
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
  measured: string;
  met: boolean;
}

const cpuPerMessage = (row: Row, name: string) =>
  ((row.result.cpuPercent[name] ?? Number.NaN) * 10_000) / row.result.perSecond;

export function checkGoals(rows: Row[], rawVerifyMicros: number): GoalCheck[] {
  const find = (key: string) => rows.find((row) => row.key === key);
  const ceiling = find("http-verify");
  const embeddedWs = find("embedded-ws");
  const embeddedHttp = find("embedded-http");
  const natsWs = find("nats-ws");
  const checks: GoalCheck[] = [];
  const ratio = (value: number, target: number) => `${value.toFixed(2)}× (goal ${target}×)`;
  if (embeddedWs) {
    const cpu = cpuPerMessage(embeddedWs, "server") / rawVerifyMicros;
    checks.push({
      goal: "embedded WS: server CPU/msg ≤ 2.5 × one raw verify",
      measured: `${ratio(cpu, 2.5)}: ${cpuPerMessage(embeddedWs, "server").toFixed(0)} vs ${rawVerifyMicros.toFixed(0)} µs`,
      met: cpu <= 2.5,
    });
  }
  if (ceiling) {
    const base = ceiling.result;
    for (const [row, target] of [
      [embeddedWs, 0.85],
      [embeddedHttp, 0.7],
    ] as const) {
      if (!row) continue;
      const value = row.result.perSecond / base.perSecond;
      checks.push({
        goal: `${row.key}: msgs/s ≥ ${target} × http+verify`,
        measured: ratio(value, target),
        met: value >= target,
      });
    }
    if (embeddedWs) {
      const value = embeddedWs.result.p99Ms / base.p99Ms;
      checks.push({
        goal: "embedded-ws: p99 ≤ 1.5 × http+verify p99",
        measured: `${ratio(value, 1.5)}: ${embeddedWs.result.p99Ms.toFixed(1)} vs ${base.p99Ms.toFixed(1)} ms`,
        met: value <= 1.5,
      });
    }
  }
  if (natsWs && embeddedWs) {
    const rate = natsWs.result.perSecond / embeddedWs.result.perSecond;
    checks.push({
      goal: "nats-ws: msgs/s ≥ 0.7 × embedded-ws",
      measured: ratio(rate, 0.7),
      met: rate >= 0.7,
    });
    const cpu = cpuPerMessage(natsWs, "server") / cpuPerMessage(embeddedWs, "server");
    checks.push({
      goal: "nats-ws: gateway CPU/msg ≤ 1.3 × embedded-ws",
      measured: `${ratio(cpu, 1.3)}; nats-server ${cpuPerMessage(natsWs, "nats").toFixed(0)} µs/msg beside it`,
      met: cpu <= 1.3,
    });
  }
  return checks;
}

export function printGoals(checks: GoalCheck[], rawVerifyMicros: number): void {
  if (checks.length === 0) return;
  console.log(`\nissue 15 goals (one raw Ed25519 verify here: ${rawVerifyMicros.toFixed(0)} µs CPU):`);
  for (const check of checks) {
    console.log(`  ${check.met ? "met    " : "NOT met"}  ${check.goal}: ${check.measured}`);
  }
}
