/**
 * Files only their owner can read, whatever the umask: the gateway's data directory is 0700 and
 * every file it writes 0600 (message bodies, audit logs, keys). A mode given at creation is
 * narrowed by the umask, never widened, so 0600 and 0700 hold under any umask; what was created
 * more open by an earlier version is narrowed here, and the caller says so.
 */
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from "node:fs";

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * A path that was open to others: its mode before (octal text), and why it could not be narrowed
 * when it could not (another user owns it, a file system without modes): then it stays as it was.
 */
export interface ModeNarrowed {
  path: string;
  was: string;
  failed?: string;
}

/** One line for the log: what was narrowed, or what is still open to others and why. */
export function describeNarrowed({ path, was, failed }: ModeNarrowed): string {
  return failed === undefined
    ? `${path} was open to other users (mode ${was}); narrowed to owner-only`
    : `${path} is open to other users (mode ${was}) and could not be narrowed: ${failed}`;
}

/**
 * Creates `dir` (and missing parents) 0700, or narrows an existing one that group or others can
 * enter. Returns what it narrowed (or failed to), for a warning; undefined when nothing was open.
 */
export function ensurePrivateDir(dir: string): ModeNarrowed | undefined {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  return narrow(dir, PRIVATE_DIR_MODE);
}

/**
 * Creates an empty `file` 0600 when it does not exist (so a library that creates its own files,
 * SQLite, opens one with the right mode), or narrows an existing one. Returns what it narrowed.
 */
export function ensurePrivateFile(file: string, create = true): ModeNarrowed | undefined {
  if (create) closeSync(openSync(file, "a", PRIVATE_FILE_MODE));
  return narrow(file, PRIVATE_FILE_MODE);
}

function narrow(path: string, mode: number): ModeNarrowed | undefined {
  let current: number;
  try {
    current = statSync(path).mode & 0o777;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  if ((current & ~mode) === 0) return undefined;
  const was = current.toString(8).padStart(4, "0");
  try {
    chmodSync(path, current & mode);
  } catch (err) {
    return { path, was, failed: (err as Error).message };
  }
  return { path, was };
}
