import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach } from "vitest";

/**
 * Fresh temporary directories, removed after the current test, or after the current suite when
 * `lifetime` is "suite" (for a directory a `beforeAll` server runs in). Vitest runs after-hooks in
 * reverse order, so a suite's own `afterAll` (stopping what uses the directory) runs first.
 */
export function useTmpDir(prefix = "acp-test-", lifetime: "test" | "suite" = "test"): () => string {
  const dirs: string[] = [];
  (lifetime === "suite" ? afterAll : afterEach)(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  };
}
