/**
 * The CLI starts lean: a command loads only its own modules (not the SDK, SQLite, NATS, zod or the
 * MCP and A2A SDKs of other commands), and a reader that closes its output early ends the command
 * quietly. The binary is a bundle (dist/bin/acp.js, scripts/bundle-cli.mjs): the modules a command
 * loaded are read from the source maps of the bundle's files it loaded. What is loaded is checked, not how long it takes (timing is `npm run bench -- cli`).
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { COMMAND_NAMES } from "../../src/cli/commands/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-cli-startup-");
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** ESM modules go through the load hook (run on the hooks thread, so it writes to the file itself). */
const HOOKS = `
import { appendFileSync } from "node:fs";
let out;
export function initialize(data) { out = data.out; }
export async function load(url, context, next) { appendFileSync(out, url + "\\n"); return next(url, context); }
`;

/**
 * Runs `acp args` and returns every module it loaded, as paths relative to the repository (e.g.
 * `dist/cli/io.js`, `node_modules/zod/index.js`): ESM ones from a load hook, CommonJS ones (which
 * Node 20's hooks do not see) from the require cache at exit.
 */
function modulesLoadedBy(args: string[], env: Record<string, string> = {}): string[] {
  const out = join(tmp(), "loaded.txt");
  const register = `
    import { appendFileSync } from "node:fs";
    import { createRequire, register } from "node:module";
    register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)}, { data: { out: ${JSON.stringify(out)} } });
    const cache = createRequire(${JSON.stringify(CLI_PATH)}).cache;
    process.on("exit", () => appendFileSync(${JSON.stringify(out)}, Object.keys(cache).map((f) => "file://" + f + "\\n").join("")));
  `;
  const result = spawnSync(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(register)}`, CLI_PATH, ...args],
    { env: { ...process.env, ...env }, encoding: "utf8" },
  );
  if (result.status !== 0) throw new Error(`acp ${args.join(" ")} failed:\n${result.stderr}`);
  const urls = readFileSync(out, "utf8").split("\n");
  const files = urls.filter((url) => url.startsWith("file://")).map((url) => fileURLToPath(url));
  return [...new Set(files.flatMap(bundledModules).map((file) => file.replace(ROOT, "")))].sort();
}

/**
 * The modules a file of the bundled binary (dist/bin) holds, from its source map (a file without one
 * only re-exports another, loaded and listed itself); any other file itself.
 */
function bundledModules(file: string): string[] {
  if (!file.startsWith(join(ROOT, "dist/bin/"))) return [file];
  if (!existsSync(`${file}.map`)) return [];
  const map = JSON.parse(readFileSync(`${file}.map`, "utf8")) as { sources: string[] };
  return map.sources.map((source) => resolve(dirname(file), source));
}

/** The npm packages among the loaded modules. */
const packagesOf = (modules: string[]) =>
  [...new Set(modules.flatMap((m) => /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(m)?.[1] ?? []))].sort();

describe("acp loads only what the command it runs needs (fresh node, from dist)", () => {
  it("--version loads the fast path alone: no commander, no command", () => {
    const loaded = modulesLoadedBy(["--version"]);
    expect(packagesOf(loaded)).toEqual([]);
    expect(loaded.filter((m) => m.startsWith("dist/"))).toEqual([
      "dist/cli/fast-path.js",
      "dist/cli/io.js",
      "dist/cli/leaf-spec.js",
      "dist/cli/main.js",
      "dist/cli/version.js",
    ]);
  });

  it("session log and session update load the coordination files they write, and no package (not commander, zod or YAML)", async () => {
    const root = tmp();
    const init = await runAcp(["session", "init", "--root", root]);
    expect(init.code).toBe(0);
    const env = { ACP_CONTEXT_DIR: root, ACP_SESSION_ID: init.stdout.trim() };
    for (const args of [
      ["session", "log", "alpha", "status", "working"],
      ["session", "update", "alpha", "--status", "in_progress", "--progress", "half"],
      ["session", "update", "alpha", "--status", "completed"],
    ]) {
      const loaded = modulesLoadedBy(args, env);
      expect(packagesOf(loaded), args.join(" ")).toEqual([]);
      const areas = new Set(loaded.flatMap((m) => /^dist\/([^/]+)\//.exec(m)?.[1] ?? []));
      expect([...areas].sort(), args.join(" ")).toEqual(["cli", "coordination", "jsonl"]);
      expect(loaded, args.join(" ")).not.toContain("dist/coordination/schemas.js");
    }
  });

  it("a command of another group loads its own modules, not the session's", () => {
    const loaded = modulesLoadedBy(["keygen", "--help"]);
    expect(loaded).toContain("dist/cli/commands/keys.js");
    expect(loaded).not.toContain("dist/cli/commands/session.js");
    expect(packagesOf(loaded)).not.toContain("better-sqlite3");
  });
});

describe("acp dispatches every command to its group", () => {
  it("lists exactly the commands of the dispatch table in --help", async () => {
    const help = await runAcp(["--help"]);
    expect(help.code).toBe(0);
    const listed = [...help.stdout.split("Commands:")[1]!.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]);
    expect(listed.filter((name) => name !== "help").sort()).toEqual([...COMMAND_NAMES].sort());
  });

  it("shows each command's own help, directly and through `acp help`", async () => {
    for (const name of ["status", "session", "verify"]) {
      for (const args of [
        [name, "--help"],
        ["help", name],
      ]) {
        const result = await runAcp(args);
        expect(result.code, args.join(" ")).toBe(0);
        expect(result.stdout).toMatch(new RegExp(`^Usage: acp ${name} `));
      }
    }
  });

  it("suggests the command meant by a typo", async () => {
    const result = await runAcp(["sesion", "log"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("(Did you mean session?)");
  });

  it("prints the package's version", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    const result = await runAcp(["--version"], { env: { npm_package_version: "" } });
    expect(result.stdout.trim()).toBe(version);
  });
});

/** Spawns acp with its stdout a pipe; the test decides when to close the reading end. */
function spawnAcp(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI_PATH, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const exit = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.on("close", (code) => resolve({ code, stderr })),
  );
  return { child, exit };
}

describe("a reader that closes acp's output early (acp … | head -1)", () => {
  it("ends a one-shot command quietly with status 141, as git and ls end", async () => {
    for (const args of [["--version"], ["--help"], ["keygen", "--help"]]) {
      const { child, exit } = spawnAcp(args);
      child.stdout.destroy(); // the reader is gone before the command writes
      const { code, stderr } = await exit;
      expect({ args, code, stderr }).toEqual({ args, code: 141, stderr: "" });
    }
  });

  it("ends a following command at its next line after the reader left", async () => {
    const root = tmp();
    const init = await runAcp(["session", "init", "--root", root]);
    const env = { ACP_CONTEXT_DIR: root, ACP_SESSION_ID: init.stdout.trim() };
    await runAcp(["session", "log", "alpha", "status", "first"], { env });
    const { child, exit } = spawnAcp(["session", "events", "--follow"], env);
    // `head -1`: read the first line, then close.
    await new Promise<void>((resolve) =>
      child.stdout.setEncoding("utf8").on("data", (d: string) => d.includes("\n") && resolve()),
    );
    child.stdout.destroy();
    await runAcp(["session", "log", "alpha", "status", "second"], { env });
    const { code, stderr } = await exit;
    expect({ code, stderr }).toEqual({ code: 141, stderr: "" });
  });
});
