/**
 * The benchmark's child processes: the gateway (the real CLI, `acp gateway`), nats-server, and the
 * peer servers. Each runs in its own process so that on this 2-core machine the load generator
 * and the server under test each get a core.
 */
import { type ChildProcess, fork, spawn } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The CLI compiled alongside this benchmark (.bench-build/src/cli/main.js), so it is never stale. */
export const CLI_PATH = join(here, "../../src/cli/main.js");
export const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux build Node supports

/** User + system CPU seconds a process has used so far (Linux /proc; 0 where unavailable). */
export function cpuSecondsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the ")" that closes the command name: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** Nanoseconds a process's main thread (its event loop) has spent runnable but waiting for a CPU. */
export function runQueueWaitNsOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]);
  } catch {
    return Number.NaN;
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
export function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** Kills whatever is still running if the benchmark dies half-way. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});
function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

/** Waits until `pattern` appears in the child's output; rejects if it exits first or takes too long. */
function waitForOutput(
  child: ChildProcess,
  pattern: RegExp,
  what: string,
  timeoutMs = 20_000,
): Promise<RegExpExecArray> {
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${what} did not start within ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited early (code ${code}, signal ${signal}):\n${output}`));
    });
  });
}

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  wsUrl: string;
}

/**
 * `acp gateway` with the rate limit lifted (the default 2,000/s per agent would cap the benchmark)
 * and everything else at its defaults, relay audit log included. `profileDir` adds `--cpu-prof`.
 */
export async function spawnGateway(options: {
  dataDir: string;
  natsUrl?: string;
  profileDir?: string;
  /** SIGUSR2 makes the gateway collect its garbage (see `collectGarbage`). */
  collectGarbageOnSignal?: boolean;
}): Promise<GatewayProcess> {
  const nodeArgs = options.profileDir ? ["--cpu-prof", "--cpu-prof-dir", options.profileDir] : [];
  if (options.collectGarbageOnSignal) nodeArgs.push("--expose-gc", "--import", COLLECT_GARBAGE_PRELOAD);
  const args = [CLI_PATH, "gateway", "--port", "0", "--data", options.dataDir, "--rate-limit", "1000000000"];
  if (options.natsUrl) args.push("--nats", options.natsUrl);
  const child = track(
    spawn(process.execPath, [...nodeArgs, ...args], {
      env: { ...process.env, ACP_ADMIN_TOKEN: ADMIN_TOKEN, ACP_LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const match = await waitForOutput(child, /ACP gateway on (\S+)/, "the gateway");
  const url = match[1] as string;
  // Keep draining its output so a chatty child never blocks on a full pipe.
  child.stdout?.resume();
  child.stderr?.on("data", (chunk: Buffer) => process.stderr.write(`[gateway] ${chunk.toString()}`));
  return { child, url, wsUrl: `${url.replace(/^http/, "ws")}/api/v1/ws` };
}

const COLLECT_GARBAGE_PRELOAD = pathToFileURL(join(here, "collect-garbage-on-signal.js")).href;

/**
 * A full garbage collection in a gateway spawned with `collectGarbageOnSignal`, then a pause for it
 * to finish and return freed pages, so an RSS read after it counts what is live, not what is garbage.
 */
export async function collectGarbage(gateway: GatewayProcess): Promise<void> {
  gateway.child.kill("SIGUSR2");
  await new Promise((resolve) => setTimeout(resolve, 1000));
}

/** Debian installs nats-server in /usr/sbin, which is not on every user's PATH. */
export function findNatsServer(): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/usr/local/sbin", "/sbin"];
  for (const dir of dirs.filter(Boolean)) {
    const candidate = join(dir, "nats-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export async function startNatsServer(
  binary: string,
  storeDir: string,
  moreArgs: string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = track(
    spawn(binary, ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", storeDir, ...moreArgs], {
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  await waitForOutput(child, /Server is ready/, "nats-server");
  child.stdout?.resume();
  child.stderr?.resume();
  return { child, url: `nats://127.0.0.1:${port}` };
}

/** A peer server (bench/gateway/peer-server.js) in a child process; it reports its URL over IPC. */
export async function forkPeerServer(
  kind: string,
  config: Record<string, unknown>,
): Promise<{ child: ChildProcess; url: string }> {
  const child = track(
    fork(join(here, "peer-server.js"), [kind, JSON.stringify(config)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.once("message", (message: { url?: string }) =>
      message.url ? resolve(message.url) : reject(new Error(`peer ${kind}: ${JSON.stringify(message)}`)),
    );
    child.once("exit", (code) => reject(new Error(`peer server ${kind} exited with code ${code}`)));
  });
  return { child, url };
}
