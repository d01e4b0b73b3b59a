/**
 * Bundles the compiled CLI (dist/cli/main.js, tsc's output) into dist/bin/acp.js, the package's
 * `acp` binary. Start-up is most of what a CLI call costs, and Node's ESM loader resolves, reads and
 * links every module one by one: a bundle loads a command in a few files instead of dozens. Each
 * command group stays a chunk of its own (the dispatch table's dynamic imports), so a command still
 * loads only its own code. Commander is bundled in (it is on every command's path); every other
 * package stays external (native addons, and code only some commands load). The source map lets
 * test/cli/startup.test.ts name the modules a command loaded.
 */
import { chmodSync, existsSync, renameSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "rolldown";

const root = fileURLToPath(new URL("..", import.meta.url));
const out = `${root}dist/bin`;
// Built beside the old bundle and swapped in, so a command started meanwhile finds a whole one.
const next = `${out}.next-${process.pid}`;
const old = `${out}.old-${process.pid}`;

/**
 * What `acp session log` and `acp session update` (src/cli/fast-path.ts) load beyond the binary's
 * own modules, in one chunk: the static closure of their command table and of the modules it imports
 * when a command runs. Split by use, it would be a dozen small chunks, each a file for Node's ESM
 * loader to resolve, read and link on every call. The modules the binary itself loads (shared with
 * `acp --version` and every other command) are a chunk of their own, `cli`: a group takes the
 * modules its members import along unless another group holds them.
 */
const HOT_TABLE = `${root}dist/cli/commands/session-log-update.js`;
const MAIN = `${root}dist/cli/main.js`;
let closures;
function chunkOf(id, context) {
  if (closures === undefined) {
    const closure = (roots) => {
      const seen = new Set();
      const visit = (m) => {
        if (seen.has(m)) return;
        seen.add(m);
        for (const next of context.getModuleInfo(m)?.importedIds ?? []) visit(next);
      };
      for (const r of roots) visit(r);
      return seen;
    };
    const binary = closure([MAIN]);
    const hot = closure([HOT_TABLE, ...(context.getModuleInfo(HOT_TABLE)?.dynamicallyImportedIds ?? [])]);
    closures = { binary, hot };
  }
  if (closures.binary.has(id)) return id === MAIN ? null : "cli";
  return closures.hot.has(id) ? "session-write" : null;
}

const isPackage = (id) => /^(?![./])(?!node:)/.test(id);
await build({
  input: { acp: `${root}dist/cli/main.js` },
  platform: "node",
  external: (id) => id.startsWith("node:") || (isPackage(id) && !/^commander(\/|$)/.test(id)),
  logLevel: "warn",
  onLog(level, log, handler) {
    // The session commands import modules of their chunk lazily, as the library's code is written.
    if (log.code === "INEFFECTIVE_DYNAMIC_IMPORT" && closures?.hot.has(log.id)) return;
    handler(level, log);
  },
  output: {
    dir: next,
    format: "esm",
    sourcemap: true,
    sourcemapExcludeSources: true,
    entryFileNames: "[name].js",
    chunkFileNames: "chunks/[name]-[hash].js",
    codeSplitting: { groups: [{ name: chunkOf, debugName: "cli and session-write" }] },
  },
});
chmodSync(`${next}/acp.js`, 0o755);
if (existsSync(out)) renameSync(out, old);
renameSync(next, out);
rmSync(old, { recursive: true, force: true });
