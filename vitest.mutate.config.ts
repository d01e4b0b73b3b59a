import { defineConfig } from "vitest/config";
import { mutationModules } from "./scripts/mutation-modules.mjs";
import base from "./vitest.config.js";

/**
 * The test configuration for mutation runs: only the files in ACP_MUTATE_TESTS (comma-separated),
 * and of those only the tests whose names match ACP_MUTATE_TEST_NAMES when it is set.
 */
const testNames = process.env.ACP_MUTATE_TEST_NAMES;
/** A module may shorten the test and hook timeouts for its mutants (`testTimeoutMs`). */
const testTimeoutMs: number | undefined = mutationModules[process.env.ACP_MUTATE_MODULE ?? ""]?.testTimeoutMs;
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: (process.env.ACP_MUTATE_TESTS ?? "").split(",").filter(Boolean),
    ...(testNames ? { testNamePattern: new RegExp(testNames) } : {}),
    ...(testTimeoutMs ? { testTimeout: testTimeoutMs, hookTimeout: testTimeoutMs } : {}),
    // The modules' own tests import src and start no CLI, so they need no dist/: without this the
    // build ran again at every restart of the test runner (after each timed-out mutant).
    globalSetup: [],
  },
});
