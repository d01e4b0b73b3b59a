import { open, stat, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { CoordinationError } from "./errors.js";
import { randomHex, readTextIfExists, sleep } from "./fs-atomic.js";
import { checkFormat } from "./quick-check.js";
import type { LockOwner } from "./schemas.js";

/** A lock older than this is presumed abandoned even if its owner cannot be checked (another host). */
export const DEFAULT_LOCK_STALE_MS = 30_000;
/** How long an acquirer waits for a live owner before giving up. */
export const DEFAULT_LOCK_TIMEOUT_MS = 15_000;
/** A lock file with no owner written yet is normal for microseconds; after this it is a crash leftover. */
const UNWRITTEN_LOCK_GRACE_MS = 5_000;
/** The guard that serialises stale-lock breaking is held for microseconds. */
const BREAKER_STALE_MS = 5_000;

export interface LockOptions {
  staleMs?: number;
  timeoutMs?: number;
}

/** What is in a lock file now: the parsed owner (absent while unwritten or unreadable) and its age. */
export interface LockState {
  raw: string;
  owner: LockOwner | undefined;
  mtimeMs: number;
}

/**
 * An exclusive lock file (created with O_EXCL) holding its owner {pid, host, time, token}. Stale locks
 * (owner process dead on this host, or older than `staleMs`) are broken under a second O_EXCL guard
 * that re-checks the same owner is still there, so two waiters never both break and both enter.
 */
export class FileLock {
  private constructor(
    readonly path: string,
    readonly owner: LockOwner,
  ) {}

  /**
   * Creates the lock file, waiting for a live owner up to `timeoutMs` and taking over a stale one (its owner
   * gone, or silent past `staleMs`); refuses with a CoordinationError when the wait times out.
   */
  static async acquire(path: string, options: LockOptions = {}): Promise<FileLock> {
    const staleMs = options.staleMs ?? DEFAULT_LOCK_STALE_MS;
    const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS);
    let backoff = 1;
    for (;;) {
      const owner: LockOwner = {
        pid: process.pid,
        host: hostname(),
        time: new Date().toISOString(),
        token: randomHex(8),
      };
      if (await createExclusive(path, JSON.stringify(owner))) return new FileLock(path, owner);
      const state = await inspectLock(path);
      if (state === undefined) continue; // released between our attempt and our look: try again now
      if (staleReason(state, staleMs) !== undefined) {
        await breakStaleLock(path, state);
        continue;
      }
      if (Date.now() > deadline) {
        const who = state.owner
          ? `pid ${state.owner.pid} on ${state.owner.host} since ${state.owner.time}`
          : "an owner that has not written its name yet";
        throw new CoordinationError("lock_timeout", `still locked by ${who} after waiting`, { file: path });
      }
      await sleep(backoff * (0.5 + Math.random()));
      backoff = Math.min(backoff * 1.5, 25);
    }
  }

  /** True while the lock file still carries our token (it is gone only if someone judged us stale). */
  async stillHeld(): Promise<boolean> {
    const state = await inspectLock(this.path);
    return state?.owner?.token === this.owner.token;
  }

  /** Removes the lock file if it is still ours (someone may have judged us stale and taken it over). */
  async release(): Promise<void> {
    if (await this.stillHeld()) await unlink(this.path).catch(ignoreMissing);
  }
}

/** Runs `fn` holding the lock; always releases it. */
export async function withFileLock<T>(
  path: string,
  fn: (lock: FileLock) => Promise<T>,
  options?: LockOptions,
): Promise<T> {
  const lock = await FileLock.acquire(path, options);
  try {
    return await fn(lock);
  } finally {
    await lock.release();
  }
}

export async function inspectLock(path: string): Promise<LockState | undefined> {
  const [raw, info] = await Promise.all([readTextIfExists(path), stat(path).catch(() => undefined)]);
  if (raw === undefined || info === undefined) return undefined;
  let owner: LockOwner | undefined;
  try {
    owner = await checkFormat("LockOwnerSchema", JSON.parse(raw), { file: path });
  } catch {
    owner = undefined;
  }
  return { raw, owner, mtimeMs: info.mtimeMs };
}

/** Why a lock is abandoned, or undefined while its owner may still be working. */
export function staleReason(state: LockState, staleMs: number, now = Date.now()): string | undefined {
  if (state.owner === undefined) {
    return now - state.mtimeMs > UNWRITTEN_LOCK_GRACE_MS ? "owner never written" : undefined;
  }
  if (state.owner.host === hostname() && !processAlive(state.owner.pid)) {
    return `owner pid ${state.owner.pid} is not running`;
  }
  const age = now - Date.parse(state.owner.time);
  return age > staleMs ? `held for ${Math.round(age / 1000)}s` : undefined;
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function breakStaleLock(path: string, judged: LockState): Promise<void> {
  const guard = `${path}.break`;
  const guardOwner = JSON.stringify({ pid: process.pid, host: hostname(), time: new Date().toISOString() });
  if (!(await createExclusive(guard, guardOwner))) {
    // Another process is breaking it right now; a guard left by a crashed breaker is removed.
    const info = await stat(guard).catch(() => undefined);
    if (info !== undefined && Date.now() - info.mtimeMs > BREAKER_STALE_MS)
      await unlink(guard).catch(ignoreMissing);
    await sleep(1);
    return;
  }
  try {
    const now = await inspectLock(path);
    // Only remove the very lock we judged stale: if it changed, its new owner is alive.
    if (now !== undefined && now.raw === judged.raw && now.mtimeMs === judged.mtimeMs) {
      await unlink(path).catch(ignoreMissing);
    }
  } finally {
    await unlink(guard).catch(ignoreMissing);
  }
}

/** Creates `path` only if it does not exist (O_CREAT|O_EXCL); false when someone else has it. */
async function createExclusive(path: string, content: string): Promise<boolean> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, "wx", 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new CoordinationError("not_found", "session directory does not exist", { file: path });
    }
    throw err;
  }
  try {
    await handle.writeFile(content, "utf8");
  } finally {
    await handle.close();
  }
  return true;
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
}
