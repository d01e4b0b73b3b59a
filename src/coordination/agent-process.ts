/** Runs one agent's command as a child process for the coordinator, keeping its output and stderr tail. */
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";

const STDERR_TAIL_BYTES = 4096;
const STDERR_TAIL_LINES = 20;
/** After the process exits, how long to wait for its pipes to drain (a grandchild may hold them). */
const PIPE_DRAIN_MS = 500;

export interface AgentProcessSpec {
  name: string;
  command: string | string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  attempt: number;
  logDir: string;
  timeoutMs?: number;
  killGraceMs: number;
  signal?: AbortSignal;
}

export interface AgentProcessExit {
  exitCode: number | null;
  signal: string | null;
  /** The last lines of stderr, for the failure record. */
  stderrTail: string;
  spawnError?: string;
  timedOut: boolean;
  interrupted: boolean;
  logFile: string;
}

/**
 * Starts the command in its own process group (so a shell's children are stopped with it, and end
 * when it ends), appends
 * stdout and stderr to `logs/{agent}.log`, and resolves when it ends. Never rejects.
 */
export async function runAgentProcess(spec: AgentProcessSpec): Promise<AgentProcessExit> {
  await mkdir(spec.logDir, { recursive: true });
  const logFile = join(spec.logDir, `${spec.name}.log`);
  const log = createWriteStream(logFile, { flags: "a" });
  log.write(`--- ${new Date().toISOString()} attempt ${spec.attempt}: ${JSON.stringify(spec.command)}\n`);
  const [file, args, shell] =
    typeof spec.command === "string"
      ? [spec.command, [], true]
      : [spec.command[0]!, spec.command.slice(1), false];

  let tail = Buffer.alloc(0);
  let timedOut = false;
  let interrupted = false;
  const result = await new Promise<
    Omit<AgentProcessExit, "stderrTail" | "timedOut" | "interrupted" | "logFile">
  >((resolve) => {
    const child = spawn(file, args, {
      cwd: spec.cwd,
      env: spec.env,
      shell,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const stop = (): void => {
      killGroup(child.pid, "SIGTERM");
      setTimeout(() => killGroup(child.pid, "SIGKILL"), spec.killGraceMs).unref();
    };
    const timer =
      spec.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            stop();
          }, spec.timeoutMs);
    const onAbort = (): void => {
      interrupted = true;
      stop();
    };
    spec.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.pipe(log, { end: false });
    child.stderr.on("data", (chunk: Buffer) => {
      log.write(chunk);
      tail = Buffer.concat([tail, chunk]).subarray(-STDERR_TAIL_BYTES);
    });
    let ended = false;
    const finish = (value: Omit<AgentProcessExit, "stderrTail" | "timedOut" | "interrupted" | "logFile">) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      spec.signal?.removeEventListener("abort", onAbort);
      // Output arriving later (from a grandchild still holding the pipes) is dropped, not written after end.
      child.stdout.unpipe(log);
      child.stdout.destroy();
      child.stderr.destroy();
      resolve(value);
    };
    child.on("error", (err) => finish({ exitCode: null, signal: null, spawnError: err.message }));
    child.on("exit", (exitCode, signal) => {
      // The agent is done, so is whatever it started (`sleep 47 & exit 1`): end its whole group.
      endGroup(child.pid, spec.killGraceMs);
      const done = () => finish({ exitCode, signal });
      child.on("close", done);
      setTimeout(done, PIPE_DRAIN_MS).unref();
    });
  });
  await new Promise<void>((resolve) => log.end(resolve));
  return { ...result, stderrTail: lastLines(tail.toString("utf8")), timedOut, interrupted, logFile };
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** SIGTERM to the group now, SIGKILL to whatever of it is still there after the grace period. */
function endGroup(pid: number | undefined, graceMs: number): void {
  if (pid === undefined || !groupAlive(pid)) return;
  killGroup(pid, "SIGTERM");
  setTimeout(() => {
    if (groupAlive(pid)) killGroup(pid, "SIGKILL");
  }, graceMs).unref();
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function lastLines(text: string): string {
  return text.trimEnd().split("\n").slice(-STDERR_TAIL_LINES).join("\n");
}
