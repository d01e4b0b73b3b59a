import { execFileSync } from "node:child_process";

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
