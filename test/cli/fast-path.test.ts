/**
 * `acp --version`, `acp session log` and `acp session update` run without commander when their
 * command line reads plainly (src/cli/fast-path.ts). The fast path and the full commander CLI are run
 * on the same command lines against identical sessions: what the fast path runs must print, exit and
 * write exactly what commander's run does (timestamps and the session root aside), refusals included;
 * what it leaves to commander (help, unknown or repeated options, values outside their choices,
 * missing or extra arguments) it must leave untouched.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { type CliResult, runNodeScript } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";

const BY_PATH = fileURLToPath(new URL("./fixtures/acp-by-path.mjs", import.meta.url));
const SESSION_ID = "a1b2c3d4-e5f6-7890-abcd-ef1234567890";
/** The exit status of the fixture's fast path when it leaves the command line to commander. */
const LEFT_TO_COMMANDER = 99;

function runPath(
  path: "fast" | "commander",
  args: string[],
  env: Record<string, string>,
): Promise<CliResult> {
  return runNodeScript(BY_PATH, [path, ...args], {
    env: { ACP_SESSION_ID: "", CLAUDE_SESSION_ID: "", ...env },
  });
}

/**
 * Runs `acp session ARGS` through `path` on a session of its own, prepared the same way each time
 * (agent `a` in progress, one event logged); `{root}` in ARGS stands for that session's root.
 * Returns what it printed and the session's files, with the root and every timestamp blanked.
 */
async function runOnFreshSession(
  path: "fast" | "commander",
  root: string,
  args: string[],
  withSessionEnv: boolean,
) {
  const session = await Session.create({ root, id: SESSION_ID });
  await session.updateAgent("a", { status: "in_progress" });
  await session.log({ from: "a", type: "status", message: "before" });
  const env = { ACP_CONTEXT_DIR: root, ...(withSessionEnv && { ACP_SESSION_ID: SESSION_ID }) };
  const result = await runPath(path, ["session", ...args.map((arg) => arg.replaceAll("{root}", root))], env);
  const blank = (text: string) =>
    text.replaceAll(root, "<root>").replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>");
  const file = (name: string) => blank(readFileSync(join(session.paths.dir, name), "utf8"));
  return {
    code: result.code,
    stdout: blank(result.stdout),
    stderr: blank(result.stderr),
    files: { coordination: file("coordination.json"), messages: file("messages.jsonl") },
  };
}

/** Command lines the fast path runs, with the status they end with. */
const RUN_BY_FAST_PATH: { args: string[]; code: number; withSessionEnv?: boolean }[] = [
  { args: ["log", "a", "status", "Starting analysis"], code: 0 },
  { args: ["log", "a", "status", "-"], code: 0 },
  {
    args: ["log", "security", "finding", "--severity", "high", "--data", '{"title":"SQL","line":42}'],
    code: 0,
  },
  { args: ["log", "perf", "finding", "Slow query", "--severity=low", "--json"], code: 0 },
  {
    args: ["log", "s", "data", "--artifact", "data/v.json", "--description", "Detailed data", "--json"],
    code: 0,
  },
  { args: ["log", "p", "error", "Failed", "--error", "details", "--json"], code: 0 },
  { args: ["log", "--root", "{root}", "b", "status", "x", "--session", SESSION_ID], code: 0 },
  { args: ["log", "b", "status", "x", "--session", SESSION_ID], code: 0, withSessionEnv: false },
  { args: ["update", "a", "--status", "completed"], code: 0 },
  { args: ["update", "a", "--status", "completed", "--json"], code: 0 },
  { args: ["update", "b", "--status", "in_progress", "--progress", "half"], code: 0 },
  { args: ["update", "b", "--depends-on", "a, c,", "--reason", "waiting for a", "--json"], code: 0 },
  { args: ["update", "a", "--status=failed", "--error", "Failed to analyze X"], code: 0 },
  { args: ["update", "a", "--progress", ""], code: 0 },
  // Refusals the command itself makes: the same message, file and field named, nothing written.
  { args: ["log", "a", "finding", "no severity"], code: 1 },
  { args: ["log", "a", "completed"], code: 1 },
  { args: ["log", "a", "status", "x", "--data", "[1]"], code: 1 },
  { args: ["log", "a", "status", "x", "--data", "{oops"], code: 1 },
  { args: ["log", "a", "status", "x", "--severity", "high"], code: 1 },
  { args: ["log", "a", "status", "x", "--artifact", "data/x.json"], code: 1 },
  { args: ["log", "../a", "status", "x"], code: 1 },
  { args: ["log", "a", "status", "x"], code: 1, withSessionEnv: false },
  { args: ["update", "a"], code: 1 },
  { args: ["update", "a", "--json"], code: 1 },
  { args: ["update", "../x", "--progress", "p"], code: 1 },
  { args: ["update", "a", "--depends-on", "b,../c"], code: 1 },
  { args: ["update", "a", "--progress", "p", "--session", "nope"], code: 1 },
  { args: ["update", "a", "--progress", "p", "--session", "../up"], code: 1 },
  { args: ["update", "a", "--progress", "p", "--root", "{root}/elsewhere"], code: 1 },
];

/** Command lines the fast path leaves to commander, which reads or refuses them its own way. */
const LEFT_TO_COMMANDER_LINES: string[][] = [
  ["log", "a", "gossip", "x"],
  ["log", "a"],
  ["log", "a", "status", "x", "extra"],
  ["log", "a", "status", "--", "-x"],
  ["log", "a", "status", "-5"],
  ["log", "a", "status", "x", "--severity", "urgent"],
  ["log", "--help"],
  ["log", "a", "status", "x", "-h"],
  ["log", "a", "status", "x", "--version"],
  ["update", "a", "--status", "done"],
  ["update", "a", "--bogus", "1"],
  ["update", "a", "--progress"],
  ["update", "a", "--progress", "-V"],
  ["update", "a", "--progress", "x", "--progress", "y"],
  ["update", "a", "--json=yes", "--progress", "x"],
  ["update", "a", "-p", "x"],
  ["update"],
  ["status"],
];

describe("the fast path runs what commander would, the same way", { timeout: 300_000 }, () => {
  const tmp = useTmpDir("acp-fast-path-");

  it.each(RUN_BY_FAST_PATH)("acp session $args.0 $args.1 …: %#", async ({ args, code, withSessionEnv }) => {
    const [fast, commander] = await Promise.all([
      runOnFreshSession("fast", tmp(), args, withSessionEnv ?? true),
      runOnFreshSession("commander", tmp(), args, withSessionEnv ?? true),
    ]);
    expect(fast.code, fast.stderr).toBe(code);
    expect(fast).toEqual(commander);
    if (code !== 0) expect(fast.stderr).toMatch(/^acp: \S/);
  });

  it("leaves every unusual command line to commander, touching nothing", async () => {
    for (const args of LEFT_TO_COMMANDER_LINES) {
      const result = await runOnFreshSession("fast", tmp(), args, true);
      expect({ args, code: result.code, stdout: result.stdout, stderr: result.stderr }).toEqual({
        args,
        code: LEFT_TO_COMMANDER,
        stdout: "",
        stderr: "left to commander\n",
      });
    }
  });

  it("prints the version as commander does, and leaves -V with anything else to it", async () => {
    const env = { npm_package_version: "" };
    const [fast, commander] = await Promise.all([
      runPath("fast", ["--version"], env),
      runPath("commander", ["--version"], env),
    ]);
    expect(fast).toEqual(commander);
    expect(fast.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect(await runPath("fast", ["-V"], env)).toEqual(await runPath("commander", ["-V"], env));
    for (const args of [["-V", "session"], ["--version", "--help"], ["--help"], []]) {
      expect((await runPath("fast", args, env)).code, args.join(" ")).toBe(LEFT_TO_COMMANDER);
    }
  });
});
