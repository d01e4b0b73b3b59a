import { link, open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/**
 * Replaces a file whole: write a temp file beside it, fsync it, rename it over the target, fsync the
 * directory. A reader sees the old content or the new one, never a mix, even across a crash.
 */
export async function writeFileAtomic(path: string, content: string, mode = 0o644): Promise<void> {
  const temp = await writeTemp(path, content, mode);
  try {
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  await fsyncDirectory(dirname(path));
}

/**
 * Creates a file whole, only if it does not exist yet: the complete temp file is hard-linked to the
 * target, which fails when another writer got there first. Returns false (and changes nothing) then.
 */
export async function createFileAtomic(path: string, content: string): Promise<boolean> {
  const temp = await writeTemp(path, content);
  try {
    await link(temp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    await rm(temp, { force: true });
  }
  await fsyncDirectory(dirname(path));
  return true;
}

/** A synced temp file beside `path`, hidden and without the `.json` suffix so listings skip it. */
async function writeTemp(path: string, content: string, mode = 0o644): Promise<string> {
  const temp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomHex(4)}`);
  try {
    const handle = await open(temp, "wx", mode);
    try {
      await handle.writeFile(content, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return temp;
}

/** Makes a rename durable. Some file systems refuse to fsync a directory; that is not an error. */
async function fsyncDirectory(dir: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EINVAL" && code !== "EISDIR" && code !== "EPERM" && code !== "EBADF") throw err;
  } finally {
    await handle?.close();
  }
}

/** The file's text, or undefined when it does not exist. */
export async function readTextIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `bytes` random bytes in hex, for unique temporary names and lock tokens. They must differ from
 * other processes' and need not be secret (whoever can read the session directory can write it), so
 * Math.random does: each process seeds it from the system's entropy. The crypto module (node:crypto
 * or Web Crypto) would cost `acp session update` about 3 % of a bare Node start just to load.
 */
export function randomHex(bytes: number): string {
  let hex = "";
  while (hex.length < bytes * 2)
    hex += Math.floor(Math.random() * 2 ** 32)
      .toString(16)
      .padStart(8, "0");
  return hex.slice(0, bytes * 2);
}
