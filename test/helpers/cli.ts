import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ADMIN_TOKEN } from "./gateway.js";

export const CLI_PATH = fileURLToPath(new URL("../../dist/bin/acp.js", import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
}

/** Runs the built `acp` binary as a real child process. */
export function runAcp(args: string[], options: RunOptions = {}): Promise<CliResult> {
  return runNodeScript(CLI_PATH, args, options);
}

/** Runs `node script args` as a real child process, with the test's environment and `options.env`. */
export function runNodeScript(script: string, args: string[], options: RunOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 20_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

export interface RunningGateway {
  child: ChildProcess;
  url: string;
  output: () => string;
}

/** Runs `acp gateway` (on a free port, admin token ADMIN_TOKEN) as a real child process and waits for its URL line. */
export function spawnGateway(args: string[]): Promise<RunningGateway> {
  const child = spawn(process.execPath, [CLI_PATH, "gateway", "--port", "0", ...args], {
    env: { ...process.env, ACP_ADMIN_TOKEN: ADMIN_TOKEN, ACP_LOG_LEVEL: "debug" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${output}`)), 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /ACP gateway on (\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1] as string, output: () => output });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => reject(new Error(`gateway exited ${code}: ${output}`)));
  });
}
