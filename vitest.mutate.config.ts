import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

/** The test configuration for mutation runs: only the files in ACP_MUTATE_TESTS (comma-separated). */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: (process.env.ACP_MUTATE_TESTS ?? "").split(",").filter(Boolean),
    // The modules' own tests import src and start no CLI, so they need no dist/: without this the
    // build ran again at every restart of the test runner (after each timed-out mutant).
    globalSetup: [],
  },
});
