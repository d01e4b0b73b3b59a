/**
 * Gateways as real child processes, so a fault can be a real `kill -9` and memory a real RSS.
 * Two ways to start one: the `acp gateway` CLI (what operators run), or — when a test needs a
 * setting the CLI does not expose (a short ack wait, a small skew window) — a one-line launcher
 * that calls the same `startDefaultGateway` with options. Both print `ACP gateway on <url>`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { DefaultGatewayOptions } from "../../../src/server.js";
import { CLI_PATH } from "../../helpers/cli.js";
import { ADMIN_TOKEN } from "../../helpers/gateway.js";
import { freePort } from "../../helpers/ports.js";

export { freePort };

const GATEWAY_MODULE = fileURLToPath(new URL("../../../dist/server.js", import.meta.url));

/** Runs `startDefaultGateway(JSON options)` from the built package; stops gracefully on SIGTERM. */
const LAUNCHER = `
const { startDefaultGateway } = await import(process.env.ACP_TEST_GATEWAY_MODULE);
const gateway = await startDefaultGateway(JSON.parse(process.env.ACP_TEST_GATEWAY_OPTIONS));
process.stdout.write("ACP gateway on " + gateway.url + "\\n");
process.once("SIGTERM", () => void gateway.close().then(() => process.exit(0)));
`;

/** Options the launcher passes to startDefaultGateway (JSON: no logger, no extensions). */
export type LaunchOptions = Omit<DefaultGatewayOptions, "logger" | "extensions" | "dashboard">;

export interface GatewayChild {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly url: string;
  readonly wsUrl: string;
  readonly port: number;
  /** Everything it printed (stdout and stderr), for failure messages. */
  output(): string;
  /** SIGKILL: a crash. Resolves when the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after 10 s. */
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/**
 * Starts a gateway child. `cli` gives `acp gateway` arguments (`--port` is added); `launch` gives
 * startGateway options instead. `prefix` runs it under another command (e.g. `setpriv …`).
 */
export async function spawnGateway(
  spec: ({ cli: string[] } | { launch: LaunchOptions }) & {
    port?: number;
    env?: Record<string, string>;
    prefix?: string[];
  },
): Promise<GatewayChild> {
  const port = spec.port ?? (await freePort());
  const nodeArgs =
    "cli" in spec
      ? [CLI_PATH, "gateway", "--port", String(port), ...spec.cli]
      : ["--input-type=module", "-e", LAUNCHER];
  const env: Record<string, string | undefined> = {
    ...process.env,
    ACP_ADMIN_TOKEN: ADMIN_TOKEN,
    ACP_LOG_LEVEL: "warn",
    ...spec.env,
  };
  if ("launch" in spec) {
    env.ACP_TEST_GATEWAY_MODULE = GATEWAY_MODULE;
    env.ACP_TEST_GATEWAY_OPTIONS = JSON.stringify({ port, ...spec.launch });
  }
  const [command, ...args] = [...(spec.prefix ?? []), process.execPath, ...nodeArgs] as [string, ...string[]];
  const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the gateway did not start in 30 s:\n${output}`)),
      30_000,
    );
    const onData = (chunk: Buffer) => {
      // Bounded: a chatty child must not grow the test's memory without limit.
      output = (output + chunk.toString()).slice(-64 * 1024);
      const match = /ACP gateway on (\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the gateway exited (code ${code}, signal ${signal}):\n${output}`));
    });
  });
  const kill = async () => {
    child.kill("SIGKILL");
    await exited(child);
  };
  return {
    child,
    pid: child.pid as number,
    url,
    wsUrl: `${url.replace(/^http/, "ws")}/api/v1/ws`,
    port,
    output: () => output,
    kill,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const force = setTimeout(() => child.kill("SIGKILL"), 10_000);
      child.kill("SIGTERM");
      await exited(child);
      clearTimeout(force);
    },
  };
}

/** Current and peak resident memory of a process, in MB (Linux /proc: VmRSS and VmHWM). */
export function memoryOf(pid: number): { rssMb: number; peakRssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rssMb: Math.round(kb("VmRSS") / 1024), peakRssMb: Math.round(kb("VmHWM") / 1024) };
}

/** The soft limit on open files of this process (Linux /proc). */
export function openFilesLimit(): number {
  const limits = readFileSync("/proc/self/limits", "utf8");
  return Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1] ?? 1024);
}

export { hasCommand, needing, setLimit } from "../../helpers/process-limits.js";

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
