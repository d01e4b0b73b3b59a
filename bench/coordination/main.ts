/**
 * Coordination throughput with 8 concurrent OS processes on one session: events appended/s and
 * coordination.json updates/s, ours beside the coordination protocol's plain-shell way (`echo >>` for
 * events; `cat | jq > tmp && mv` for updates, both as the protocol writes it with one shared /tmp
 * file and with a per-process temp file), and how many updates each way lost.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readEventLog, Session } from "../../src/coordination/index.js";

const PROCESSES = 8;
const OUR_EVENTS = 2000;
const SHELL_EVENTS = 300;
const UPDATES = 60;
const WORKER = fileURLToPath(new URL("./worker.js", import.meta.url));

interface Row {
  what: string;
  way: string;
  work: number;
  seconds: number;
  lost: string;
}
const rows: Row[] = [];
const root = mkdtempSync(join(tmpdir(), "acp-bench-coordination-"));

/** Starts PROCESSES workers, releases them together once all are ready, returns the busy window. */
async function runOurs(mode: "events" | "updates", count: number, session: Session): Promise<number> {
  const children = Array.from({ length: PROCESSES }, (_, k) =>
    spawn(process.execPath, [WORKER, mode, root, session.id, `agent-${k + 1}`, String(count)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    }),
  );
  await Promise.all(children.map((c) => new Promise((resolve) => c.once("message", resolve))));
  const reports = children.map(
    (c) =>
      new Promise<{ start: number; end: number }>((resolve) => c.once("message", (m) => resolve(m as never))),
  );
  for (const child of children) child.send("go");
  const times = await Promise.all(reports);
  await Promise.all(
    children.map((c) => (c.exitCode !== null ? undefined : new Promise((r) => c.once("exit", r)))),
  );
  return (Math.max(...times.map((t) => t.end)) - Math.min(...times.map((t) => t.start))) / 1000;
}

/** Runs PROCESSES copies of a bash loop (the coordination protocol's shell commands), released together; returns seconds. */
async function runShell(dir: string, script: (k: number) => string): Promise<number> {
  const go = join(dir, "go");
  const children = Array.from({ length: PROCESSES }, (_, k) =>
    spawn("bash", ["-c", `cd "${dir}"; while [ ! -e go ]; do sleep 0.005; done; ${script(k + 1)}`], {
      stdio: ["ignore", "ignore", "ignore"],
    }),
  );
  await new Promise((r) => setTimeout(r, 300));
  const start = performance.now();
  writeFileSync(go, "");
  await Promise.all(children.map((c) => new Promise((r) => c.once("exit", r))));
  return (performance.now() - start) / 1000;
}

async function freshSession(): Promise<Session> {
  const session = await Session.create({ root });
  await session.update((c) => {
    for (let k = 1; k <= PROCESSES; k++)
      c.agents[`agent-${k}`] = { status: "in_progress", dependencies: [], count: 0 };
  });
  return session;
}

function lostUpdates(file: string): string {
  let agents: Record<string, { count?: number }>;
  try {
    agents = JSON.parse(readFileSync(file, "utf8")).agents;
  } catch {
    return "all: coordination.json corrupted";
  }
  const kept = Object.values(agents).reduce((sum, a) => sum + (a.count ?? 0), 0);
  const lost = PROCESSES * UPDATES - kept;
  return `${lost} (${((100 * lost) / (PROCESSES * UPDATES)).toFixed(0)}%)`;
}

async function eventsIntact(session: Session, expected: number): Promise<string> {
  const { events, problems } = await readEventLog(session.paths.messages);
  return `${expected - events.length}${problems.length > 0 ? `, ${problems.length} bad lines` : ""}`;
}

function hasJq(): boolean {
  try {
    execFileSync("which", ["jq"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

try {
  let session = await freshSession();
  const ourEventSeconds = await runOurs("events", OUR_EVENTS, session);
  rows.push({
    what: "events",
    way: "acp Session.log (O_APPEND, 1 write)",
    work: PROCESSES * OUR_EVENTS,
    seconds: ourEventSeconds,
    lost: await eventsIntact(session, PROCESSES * OUR_EVENTS),
  });

  session = await freshSession();
  const shellEventSeconds = await runShell(
    session.paths.dir,
    (k) =>
      `for i in $(seq 1 ${SHELL_EVENTS}); do echo "{\\"timestamp\\":\\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\\",\\"from\\":\\"agent-${k}\\",\\"type\\":\\"status\\",\\"message\\":\\"event $i\\"}" >> messages.jsonl; done`,
  );
  rows.push({
    what: "events",
    way: "shell: echo >> (date per event)",
    work: PROCESSES * SHELL_EVENTS,
    seconds: shellEventSeconds,
    lost: await eventsIntact(session, PROCESSES * SHELL_EVENTS),
  });

  session = await freshSession();
  const ourUpdateSeconds = await runOurs("updates", UPDATES, session);
  rows.push({
    what: "updates",
    way: "acp Session.update (lock, fsync, rename)",
    work: PROCESSES * UPDATES,
    seconds: ourUpdateSeconds,
    lost: lostUpdates(session.paths.coordination),
  });

  if (hasJq()) {
    for (const [way, temp] of [
      ["shell: cat | jq > /tmp/coord.json && mv (as written)", "coord.tmp.json"],
      ["shell: same, one temp file per process", "coord.$$.json"],
    ] as const) {
      session = await freshSession();
      const seconds = await runShell(
        session.paths.dir,
        (k) =>
          `for i in $(seq 1 ${UPDATES}); do cat coordination.json | jq '.agents["agent-${k}"].count = ((.agents["agent-${k}"].count // 0) + 1)' > ${temp} && mv ${temp} coordination.json; done 2>/dev/null`,
      );
      rows.push({
        what: "updates",
        way,
        work: PROCESSES * UPDATES,
        seconds,
        lost: lostUpdates(session.paths.coordination),
      });
    }
  } else {
    console.log("jq is not installed (`which jq` found nothing): the plain-shell update rows are skipped.");
  }

  const rate = (r: Row) => r.work / r.seconds;
  console.log(
    `coordination: ${PROCESSES} concurrent processes, one session, ${availableParallelism()} CPU cores\n`,
  );
  console.log(
    `${"".padEnd(8)}${"way".padEnd(52)}${"work".padStart(7)}${"seconds".padStart(9)}${"per s".padStart(10)}  lost`,
  );
  for (const r of rows) {
    console.log(
      `${r.what.padEnd(8)}${r.way.padEnd(52)}${String(r.work).padStart(7)}${r.seconds.toFixed(2).padStart(9)}${rate(r).toFixed(0).padStart(10)}  ${r.lost}`,
    );
  }
  const [ourEvents, shellEvents, ourUpdates, ...shellUpdates] = rows;
  console.log("");
  if (ourEvents && shellEvents)
    console.log(
      `events:  acp ${(rate(ourEvents) / rate(shellEvents)).toFixed(1)}× the plain-shell echo >> rate`,
    );
  for (const shell of shellUpdates) {
    if (ourUpdates)
      console.log(
        `updates: acp ${(rate(ourUpdates) / rate(shell)).toFixed(1)}× "${shell.way}", which lost ${shell.lost}`,
      );
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
