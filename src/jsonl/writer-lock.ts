/**
 * One process writes a single-writer log at a time: two writers would both build on the same last
 * line (an audit chain would fork). The lock file holds the owner's pid; a lock whose process is
 * gone is stale and taken over. A long-lived writer holds it for its life (`acquireWriterLock`);
 * writers that share a log take it around each write (`acquireWriterLockWithin`), waiting their turn.
 */
import { type FileHandle, open, rm, stat } from "node:fs/promises";
import { AppendLogError } from "./errors.js";

/** Lock paths this process holds, to tell our own live lock from a stale one left by a crash. */
const heldLocks = new Set<string>();

/** How often a writer waiting for the lock looks again. */
const RETRY_MS = 5;
/** A lock file still without a pid after this long was left by a taker that died writing it. */
const UNWRITTEN_LOCK_MS = 1_000;

/** Takes the lock file at `path`, or throws naming its holder; `what` names the guarded log. */
export async function acquireWriterLock(path: string, what: string): Promise<void> {
  const holder = await tryLock(path);
  if (holder === undefined) return;
  throw new AppendLogError(
    holder === process.pid
      ? `${what} is already open for writing in this process`
      : `${what} is already open for writing by process ${holder} (lock ${path})`,
  );
}

/** Takes the lock file at `path`, waiting up to `timeoutMs` while another writer holds it. */
export async function acquireWriterLockWithin(path: string, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const holder = await tryLock(path);
    if (holder === undefined) return;
    if (Date.now() >= deadline) {
      throw new AppendLogError(`${what}: process ${holder} held the writer lock ${path} for ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

export async function releaseWriterLock(path: string): Promise<void> {
  // Removed before it is forgotten: until then another writer of this process sees it held, and
  // does not take our file for a stale one of a dead process with our pid and remove it.
  await rm(path, { force: true });
  heldLocks.delete(path);
}

/**
 * Takes the lock (undefined), or names the live process that holds it (0: one that is writing its
 * pid this very moment). A stale lock is taken over: removed, and only if the file at `path` is still
 * the one found stale, since between looking and removing its holder may have let go and another
 * writer taken it (removing that one would let two writers in).
 */
async function tryLock(path: string): Promise<number | undefined> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fh = await open(path, "wx", 0o600);
      // Ours from this moment: another writer of this process must see it held while the pid is written.
      heldLocks.add(path);
      try {
        await fh.writeFile(`${process.pid}\n`);
      } finally {
        await fh.close();
      }
      return undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const found = await inspect(path);
    // Looked at after the read: another writer of this process may have taken it meanwhile.
    if (heldLocks.has(path)) return process.pid;
    if (!found) continue; // let go meanwhile: try again
    // No pid yet: its taker is writing it this very moment, unless it died doing so long ago.
    if (Number.isNaN(found.pid) && Date.now() - found.modifiedMs < UNWRITTEN_LOCK_MS) return 0;
    if (found.pid !== process.pid && found.pid > 0 && isAlive(found.pid)) return found.pid;
    const now = await stat(path).catch(() => undefined);
    if (heldLocks.has(path)) return process.pid;
    if (now?.ino === found.ino) await rm(path, { force: true });
  }
  throw new AppendLogError(`could not take the writer lock ${path}`);
}

/** The lock file's pid (NaN if not written yet), inode and age, read from one open file; undefined if gone. */
async function inspect(path: string): Promise<{ pid: number; ino: number; modifiedMs: number } | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const [info, text] = await Promise.all([fh.stat(), fh.readFile("utf8")]);
    return { pid: Number.parseInt(text, 10), ino: info.ino, modifiedMs: info.mtimeMs };
  } finally {
    await fh.close();
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
