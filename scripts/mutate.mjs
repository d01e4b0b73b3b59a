#!/usr/bin/env node
// `npm run mutate [module…] [--force]`: Stryker on each named trust module (all when none is named), one
// after the other, each against its own tests (scripts/mutation-modules.mjs). Reports go to
// reports/mutation/<module>.json; the scores are kept in docs/testing.md. Not part of CI.
import { spawnSync } from "node:child_process";
import { mutationModules } from "./mutation-modules.mjs";

const args = process.argv.slice(2);
// Options (`--force`: re-test every mutant, not only those an incremental run would) go to Stryker.
const strykerOptions = args.filter((arg) => arg.startsWith("--"));
const names = args.filter((arg) => !arg.startsWith("--"));
for (const name of names) {
  if (!(name in mutationModules)) {
    console.error(`unknown module ${name}; modules: ${Object.keys(mutationModules).join(", ")}`);
    process.exit(2);
  }
}
let failed = false;
for (const name of names.length > 0 ? names : Object.keys(mutationModules)) {
  console.log(`\n== mutation testing: ${name}`);
  const run = spawnSync("npx", ["stryker", "run", "stryker.config.mjs", ...strykerOptions], {
    stdio: "inherit",
    env: {
      ...process.env,
      ACP_MUTATE_MODULE: name,
      ACP_MUTATE_TESTS: mutationModules[name].tests.join(","),
      ACP_MUTATE_TEST_NAMES: mutationModules[name].testNames ?? "",
    },
  });
  failed ||= run.status !== 0;
}
process.exit(failed ? 1 : 0);
