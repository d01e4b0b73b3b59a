// Mutation testing (`npm run mutate [module…]`, scripts/mutate.mjs): one module of
// scripts/mutation-modules.mjs per run, named by ACP_MUTATE_MODULE, against its own tests only.
import { mutationModules } from "./scripts/mutation-modules.mjs";

const name = process.env.ACP_MUTATE_MODULE ?? "";
const module = mutationModules[name];
if (!module)
  throw new Error(`ACP_MUTATE_MODULE must name one of: ${Object.keys(mutationModules).join(", ")}`);

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  plugins: ["@stryker-mutator/vitest-runner"],
  // The module's own tests (ACP_MUTATE_TESTS, read by vitest.mutate.config.ts), not every test that imports it.
  vitest: { configFile: "vitest.mutate.config.ts", related: false },
  mutate: module.mutate,
  // This machine's 2 cores are shared: one mutant at a time.
  concurrency: 1,
  coverageAnalysis: "perTest",
  // On top of 1.5 times the mutant's tests' normal time; a module whose mutants often hang (a
  // promise a broken thread never answers) names a shorter one.
  timeoutMS: module.timeoutMS ?? 20_000,
  // A run after a change re-tests only the mutants whose code or covering tests changed (the
  // others keep their result from reports/mutation/<module>.incremental.json); `--force` to redo all.
  incremental: true,
  incrementalFile: `reports/mutation/${name}.incremental.json`,
  reporters: ["clear-text", "progress", "json"],
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  tempDirName: ".stryker-tmp",
  // dist/ goes into the sandbox as built: a test's child process standing in for another gateway
  // (test/broker/fixtures/hold-child.mjs) runs the built broker; the mutated code runs from src in
  // the test process.
  ignorePatterns: [".bench-build", "web/dist", "reports", "bench/results"],
  cleanTempDir: "always",
  // Stryker rewrites the sandbox's tsconfig paths with TypeScript's JavaScript API, which
  // TypeScript 7 (native) does not have. Ours point inside the project only, so there is nothing
  // to rewrite: name a file that does not exist and the step is skipped. No type checker either.
  tsconfigFile: "no-tsconfig-to-rewrite.json",
};
