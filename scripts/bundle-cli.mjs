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

const isPackage = (id) => /^(?![./])(?!node:)/.test(id);
await build({
  input: { acp: `${root}dist/cli/main.js` },
  platform: "node",
  external: (id) => id.startsWith("node:") || (isPackage(id) && !/^commander(\/|$)/.test(id)),
  logLevel: "warn",
  output: {
    dir: next,
    format: "esm",
    sourcemap: true,
    sourcemapExcludeSources: true,
    entryFileNames: "[name].js",
    chunkFileNames: "chunks/[name]-[hash].js",
  },
});
chmodSync(`${next}/acp.js`, 0o755);
if (existsSync(out)) renameSync(out, old);
renameSync(next, out);
rmSync(old, { recursive: true, force: true });
