import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

/**
 * CLI tests spawn the built binary (`dist/bin/acp.js`), so build once before any test runs.
 * tsc emits even when it reports type errors; those are `npm run check`'s to fail on, so only a
 * build that produced no binary stops the tests here.
 */
export default function setup(): void {
  const result = spawnSync("npx", ["tsc", "-p", "tsconfig.build.json"], { encoding: "utf8" });
  if (result.status !== 0)
    process.stderr.write(`note: tsc reported type errors (npm run check fails on them):\n${result.stdout}`);
  if (!existsSync("dist/cli/main.js")) throw new Error("the build produced no dist/cli/main.js");
  // The `acp` binary is the bundle of that build (scripts/bundle-cli.mjs), as the package ships it.
  const bundle = spawnSync(process.execPath, ["scripts/bundle-cli.mjs"], { encoding: "utf8" });
  if (bundle.status !== 0) throw new Error(`bundling the CLI failed:\n${bundle.stderr}`);
}
