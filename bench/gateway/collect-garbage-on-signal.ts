/**
 * Preloaded into a benchmarked gateway (`node --expose-gc --import …`): SIGUSR2 runs a full garbage
 * collection, so the scale benchmark can read RSS without the garbage of whatever ran before it.
 * Benchmark-only: the gateway itself never installs this handler.
 */
process.on("SIGUSR2", () => {
  (globalThis as { gc?: () => void }).gc?.();
});
