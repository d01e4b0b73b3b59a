/**
 * `npm run bench [-- NAME…]`: runs each benchmark `bench/<NAME>/main.ts` (compiled to .bench-build/) in
 * its own child process, one after another, so they do not compete for the machine's two cores.
 * Each benchmark prints its own human-readable table and ratios against the peers named in its issue.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(join(here, entry.name, "main.js")))
  .map((entry) => entry.name)
  .sort();
const wanted = process.argv.slice(2);
const unknown = wanted.filter((name) => !available.includes(name));
if (unknown.length > 0) {
  console.error(`unknown benchmark(s): ${unknown.join(", ")}; available: ${available.join(", ")}`);
  process.exit(2);
}
let failed = 0;
for (const name of wanted.length > 0 ? wanted : available) {
  console.log(`\n=== bench/${name} ===`);
  const result = spawnSync(process.execPath, [join(here, name, "main.js")], { stdio: "inherit" });
  if (result.status !== 0) failed++;
}
process.exit(failed > 0 ? 1 : 0);
