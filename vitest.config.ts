import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers (gateway, nats-server) on a 2-core machine: keep forks modest.
    pool: "forks",
    maxWorkers: 2,
  },
});
