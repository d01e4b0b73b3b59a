import { execFileSync } from "node:child_process";
import { describe, it } from "vitest";

/** Sets a resource limit of a running process (util-linux `prlimit`), e.g. `fsize` 1 byte. */
export function setLimit(pid: number, resource: "fsize" | "nofile", soft: string, hard = "unlimited"): void {
  execFileSync("prlimit", ["--pid", String(pid), `--${resource}=${soft}:${hard}`]);
}

/** Whether a command is on the PATH (e.g. `prlimit`, `setpriv`). */
export function hasCommand(name: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * For tests that need a system tool (`prlimit`, `setpriv`, `openssl`): with it they run; without
 * it they FAIL under CI=true (CI must install it, as with nats-server and Chromium) and elsewhere
 * are skipped with a note.
 */
export function needing(tool: string, available = hasCommand(tool)) {
  const missing = `${tool} is not installed`;
  const mode = available ? "run" : process.env.CI === "true" ? "fail" : "skip";
  if (mode === "skip") console.warn(`\n  NOTE: skipping the tests that need ${tool}: ${missing}\n`);
  const failing = () => {
    throw new Error(`${missing}; CI must install it`);
  };
  return {
    it(name: string, fn: () => Promise<void> | void, timeout?: number): void {
      if (mode === "run") it(name, fn, timeout);
      else if (mode === "fail") it(name, failing);
      else it.skip(name, fn, timeout);
    },
    describe(name: string, body: () => void): void {
      if (mode === "run") describe(name, body);
      else if (mode === "fail") describe(name, () => it(`requires ${tool}`, failing));
      else describe.skip(name, body);
    },
  };
}
