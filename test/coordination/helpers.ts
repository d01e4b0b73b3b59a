import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CliResult, runAcp } from "../helpers/cli.js";

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
export function scriptedAgent(flags: string[] = [], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { command: [process.execPath, AGENT_FIXTURE, ...flags], ...extra };
}

export function writePlan(dir: string, plan: unknown, name = "plan.yaml"): string {
  const file = join(dir, name);
  // JSON is valid YAML: the plan loader reads both.
  writeFileSync(file, typeof plan === "string" ? plan : JSON.stringify(plan, null, 2));
  return file;
}
