/**
 * CLI start-up: the wall time of one `acp` command, from spawn to exit, beside `node -e 0` (the
 * floor every Node program pays) and, for `session log`, the coordination protocol's own `echo >>`.
 * Goal: `acp --version`, `acp session log` and `acp session update` within 1.5× of `node -e 0`.
 *
 * Runs the built CLI (dist/bin/acp.js, the bundled binary; `npm run build` first). Every command runs BENCH_CLI_RUNS
 * times (default 40), interleaved round by round so a burst of load elsewhere hits all of them alike;
 * the table gives medians and, on Linux, the mean CPU time the children used (steadier than wall time
 * on a busy machine). With BENCH_CLI_INSTRUCTIONS=N, it also counts the instructions each goal
 * command executes (valgrind's cachegrind, the median of N runs): unlike time, they do not move with
 * the machine's load.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../../../dist/bin/acp.js", import.meta.url));
const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 40);
const GOAL = 1.5;

interface Subject {
  name: string;
  command: string;
  args: string[];
  /** Held to the goal (at most GOAL × `node -e 0`). */
  goal: boolean;
}

if (!existsSync(CLI)) {
  console.error(`no ${CLI}: run \`npm run build\` first`);
  process.exit(1);
}
const root = mkdtempSync(join(tmpdir(), "acp-bench-cli-"));
const env: NodeJS.ProcessEnv = { ...process.env, ACP_CONTEXT_DIR: root };
const init = spawnSync(process.execPath, [CLI, "session", "init"], { env, encoding: "utf8" });
if (init.status !== 0) throw new Error(`acp session init failed: ${init.stderr}`);
const sessionId = init.stdout.trim();
env.ACP_SESSION_ID = sessionId;
const messages = join(root, sessionId, "messages.jsonl");

const node = (args: string[]): Pick<Subject, "command" | "args"> => ({ command: process.execPath, args });
const acp = (...args: string[]) => node([CLI, ...args]);
const subjects: Subject[] = [
  { name: "node -e 0", ...node(["-e", "0"]), goal: false },
  { name: "acp --version", ...acp("--version"), goal: true },
  { name: "acp session log", ...acp("session", "log", "bench", "status", "working"), goal: true },
  { name: "acp session update", ...acp("session", "update", "bench", "--progress", "50%"), goal: true },
  {
    name: 'sh: echo "{…$(date)…}" >> messages.jsonl',
    command: "sh",
    args: [
      "-c",
      `echo "{\\"timestamp\\":\\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\\",\\"from\\":\\"bench\\",\\"type\\":\\"status\\",\\"message\\":\\"working\\"}" >> '${messages}'`,
    ],
    goal: false,
  },
  { name: "acp --help", ...acp("--help"), goal: false },
  { name: "acp session events", ...acp("session", "events", "--from", "nobody"), goal: false },
  { name: "acp send --help", ...acp("send", "--help"), goal: false },
];

/** CPU time (ms) of this process's waited-for children so far, from /proc (Linux); undefined elsewhere. */
function childrenCpuMs(): number | undefined {
  try {
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
    // After "pid (comm) ", fields[0] is state; cutime and cstime are fields 16 and 17 of the full line.
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100;
  } catch {
    return undefined;
  }
}

const wall = new Map<string, number[]>(subjects.map((s) => [s.name, []]));
const cpu = new Map<string, number>(subjects.map((s) => [s.name, 0]));
/** Instructions `command args` executes, from `valgrind --tool=cachegrind --cache-sim=no` (its "I refs"). */
function instructions(subject: Subject): number {
  const result = spawnSync(
    "valgrind",
    [
      "--tool=cachegrind",
      "--cache-sim=no",
      "--cachegrind-out-file=/dev/null",
      subject.command,
      ...subject.args,
    ],
    { env, encoding: "utf8", stdio: ["ignore", "ignore", "pipe"] },
  );
  const refs = /I\s+refs:\s+([\d,]+)/.exec(result.stderr ?? "")?.[1];
  if (result.status !== 0 || refs === undefined)
    throw new Error(
      `valgrind ${subject.name} failed (is valgrind installed?): ${result.error ?? result.stderr}`,
    );
  return Number(refs.replaceAll(",", ""));
}

const INSTRUCTION_RUNS = Number(process.env.BENCH_CLI_INSTRUCTIONS ?? 0);
const counted = new Map<string, number[]>();
try {
  for (let round = 0; round < RUNS + 1; round++) {
    for (const subject of subjects) {
      const cpuBefore = childrenCpuMs();
      const start = performance.now();
      const result = spawnSync(subject.command, subject.args, { env, stdio: ["ignore", "ignore", "pipe"] });
      const elapsed = performance.now() - start;
      const cpuAfter = childrenCpuMs();
      if (result.status !== 0) throw new Error(`${subject.name} failed: ${result.stderr}`);
      if (round === 0) continue; // warm-up: file cache, the session's first write
      wall.get(subject.name)?.push(elapsed);
      if (cpuBefore !== undefined && cpuAfter !== undefined)
        cpu.set(subject.name, (cpu.get(subject.name) ?? 0) + cpuAfter - cpuBefore);
    }
  }
  for (let round = 0; round < INSTRUCTION_RUNS; round++) {
    for (const subject of subjects.filter((s) => s.goal || s.name === "node -e 0")) {
      counted.set(subject.name, [...(counted.get(subject.name) ?? []), instructions(subject)]);
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const baseWall = median(wall.get("node -e 0") ?? []);
const baseCpu = (cpu.get("node -e 0") ?? Number.NaN) / RUNS;
const rows = subjects.map((s) => {
  const ms = median(wall.get(s.name) ?? []);
  const cpuMs = (cpu.get(s.name) ?? Number.NaN) / RUNS;
  return { ...s, ms, ratio: ms / baseWall, cpuMs, cpuRatio: cpuMs / baseCpu };
});
const header = ["command", "median ms", "× node -e 0", "cpu ms", "cpu ×", "goal"];
const lines = rows.map((r) => [
  r.name,
  r.ms.toFixed(1),
  `${r.ratio.toFixed(2)}×`,
  Number.isFinite(r.cpuMs) ? r.cpuMs.toFixed(1) : "-",
  Number.isFinite(r.cpuRatio) ? `${r.cpuRatio.toFixed(2)}×` : "-",
  r.goal ? (r.ratio <= GOAL ? `≤ ${GOAL}× met` : `≤ ${GOAL}× MISSED`) : "",
]);
const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? "").length)));
const render = (cells: string[]) =>
  cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join("  ");
console.log(`${RUNS} runs each, interleaved; medians of wall time, means of CPU time\n`);
console.log([render(header), widths.map((w) => "-".repeat(w)).join("  "), ...lines.map(render)].join("\n"));
const missed = rows.filter((r) => r.goal && r.ratio > GOAL);
console.log(
  missed.length === 0
    ? `\ngoal met: every goal command within ${GOAL}× of node -e 0`
    : `\ngoal missed by: ${missed.map((r) => `${r.name} (${r.ratio.toFixed(2)}×)`).join(", ")}`,
);
if (INSTRUCTION_RUNS > 0) {
  const base = median(counted.get("node -e 0") ?? []);
  console.log(`\ninstructions executed (valgrind cachegrind), median of ${INSTRUCTION_RUNS}:`);
  for (const [name, counts] of counted) {
    const n = median(counts);
    console.log(`${name.padEnd(20)} ${(n / 1e6).toFixed(1).padStart(7)} M  ${(n / base).toFixed(3)}×`);
  }
}
