import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CLI_PATH, type CliResult, runAcp } from "../helpers/cli.js";

/** The scripted agent the coordinator tests run (see its header for the flags). */
export const AGENT_FIXTURE = fileURLToPath(new URL("./fixtures/agent.mjs", import.meta.url));
export const WRITER_FIXTURE = fileURLToPath(new URL("./fixtures/concurrent-writer.mjs", import.meta.url));

/**
 * `acp session …` against a given context root, with any session id from the outer environment
 * blanked so only the test's own --session / env applies.
 */
export function acpSession(
  root: string,
  args: string[],
  options: { input?: string; env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  return runAcp(["session", ...args], {
    ...options,
    env: { ACP_CONTEXT_DIR: root, ACP_SESSION_ID: "", CLAUDE_SESSION_ID: "", ...options.env },
  });
}

/** A plan agent entry whose command runs the scripted agent with `flags`. */
export function scriptedAgent(
  flags: string[] = [],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { command: [process.execPath, AGENT_FIXTURE, ...flags], ...extra };
}

export function writePlan(dir: string, plan: unknown, name = "plan.yaml"): string {
  const file = join(dir, name);
  // JSON is valid YAML: the plan loader reads both.
  writeFileSync(file, typeof plan === "string" ? plan : JSON.stringify(plan, null, 2));
  return file;
}

/** A long-running `acp session …` (wait, events --follow) whose output can be awaited line by line. */
export function startAcpSession(root: string, args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI_PATH, "session", ...args], {
    env: { ...process.env, ACP_CONTEXT_DIR: root, ACP_SESSION_ID: "", CLAUDE_SESSION_ID: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const listener of listeners) listener();
  };
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
    notify();
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
    notify();
  });
  const result = new Promise<CliResult>((resolve) => {
    child.on("close", (code) => {
      notify();
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
  /** Resolves once the stream's text so far matches `pattern` (the test's timeout bounds the wait). */
  const until = (stream: "stdout" | "stderr", pattern: RegExp) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (pattern.test(stream === "stdout" ? stdout : stderr)) {
          listeners.delete(check);
          resolve();
        }
      };
      listeners.add(check);
      check();
    });
  return { child, result, until };
}
