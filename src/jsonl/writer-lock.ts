/**
 * One process owns a single-writer log: two writers would both build on the same last line (an
 * audit chain would fork). The lock file holds the owner's pid; a lock whose process is gone is
 * stale and taken over.
 */
import { open, readFile, rm } from "node:fs/promises";
import { AppendLogError } from "./errors.js";

/** Lock paths this process holds, to tell our own live lock from a stale one left by a crash. */
const heldLocks = new Set<string>();

/** Takes the lock file at `path`; `what` names the guarded log in the error messages. */
export async function acquireWriterLock(path: string, what: string): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fh = await open(path, "wx", 0o600);
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      heldLocks.add(path);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    if (heldLocks.has(path)) throw new AppendLogError(`${what} is already open for writing in this process`);
    const pid = Number.parseInt(await readFile(path, "utf8").catch(() => ""), 10);
    if (pid !== process.pid && Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
      throw new AppendLogError(`${what} is already open for writing by process ${pid} (lock ${path})`);
    }
    await rm(path, { force: true });
  }
  throw new AppendLogError(`could not take the writer lock ${path}`);
}

export async function releaseWriterLock(path: string): Promise<void> {
  heldLocks.delete(path);
  await rm(path, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
