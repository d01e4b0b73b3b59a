import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * Agents keep their state in the user state directory by default ($XDG_STATE_HOME/acp): each run
 * of the suite gets one of its own, so tests neither share state with each other's runs nor touch
 * the user's.
 */
const stateHome = mkdtempSync(join(tmpdir(), "acp-test-state-"));

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    env: { XDG_STATE_HOME: stateHome },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers (gateway, nats-server) on a 2-core machine: keep forks modest.
    pool: "forks",
    maxWorkers: 2,
  },
});
