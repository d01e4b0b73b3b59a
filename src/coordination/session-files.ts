/**
 * Reading a session's files without ever leaving the session directory. Anyone who can write in a
 * session (an agent, or a tool an agent was talked into running) could plant `reports/x.json ->
 * /etc/shadow` or make `data` a link to a home directory; the gateway would then show that file to
 * remote MCP clients and the dashboard. So a session file is read only if it is a regular file
 * that really is inside the session directory:
 *
 * - the last component is opened with O_NOFOLLOW (a link there is refused, even one pointing
 *   inside the session) and O_NONBLOCK (a FIFO cannot hang the reader), then must be a regular file;
 * - where the descriptor really points is read back (Linux: `/proc/self/fd/N`, which no swap of a
 *   directory for a link after the check can fool; elsewhere `realpath` plus an inode comparison)
 *   and must be inside the session directory's real path, so a link among the intermediate
 *   directories (`reports -> /etc`) is refused too;
 * - the session directory itself must not be a link.
 *
 * Listings use `lstat`: a link's target is never measured or dated.
 */
import { constants, type Stats } from "node:fs";
import { type FileHandle, lstat, open, readlink, realpath } from "node:fs/promises";
import { basename, dirname, join, relative, sep } from "node:path";
import { CoordinationError } from "./errors.js";

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Why a session file is refused: the same words for the CLI and, with the relative name only, for remote callers. */
export const REFUSED_LINK = "is a symbolic link: links in a session directory are not followed";
export const REFUSED_SPECIAL = "is not a regular file";
export const REFUSED_OUTSIDE = "leads outside the session directory";

/** The session directory's real path; it must not be a link itself (its parents may be). */
async function realSessionDir(dir: string): Promise<string> {
  const info = await lstat(dir);
  if (info.isSymbolicLink()) throw new CoordinationError("unsafe", REFUSED_LINK, { file: dir });
  return join(await realpath(dirname(dir)), basename(dir));
}

/**
 * Opens `path`, a file inside the session directory `dir`, for reading; undefined when it does not
 * exist. Anything but a regular file inside the session is a CoordinationError of kind `unsafe`.
 */
export async function openSessionFile(dir: string, path: string): Promise<FileHandle | undefined> {
  const inside = relative(dir, path);
  if (inside === "" || inside.startsWith("..") || inside.startsWith(sep)) {
    throw new CoordinationError("unsafe", REFUSED_OUTSIDE, { file: path });
  }
  const real = await realSessionDir(dir);
  let handle: FileHandle;
  try {
    handle = await open(path, READ_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw new CoordinationError("unsafe", REFUSED_LINK, { file: path });
    throw err;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new CoordinationError("unsafe", REFUSED_SPECIAL, { file: path });
    const where = await whereOpened(handle, path, info);
    if (!where.startsWith(real + sep)) throw new CoordinationError("unsafe", REFUSED_OUTSIDE, { file: path });
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** The whole text of a session file (UTF-8), or undefined when it does not exist. */
export async function readSessionText(dir: string, path: string): Promise<string | undefined> {
  return (await readSessionFile(dir, path))?.text;
}

/** A session file's text (UTF-8) and modification time, or undefined when it does not exist. */
export async function readSessionFile(
  dir: string,
  path: string,
): Promise<{ text: string; modifiedAt: Date } | undefined> {
  const handle = await openSessionFile(dir, path);
  if (!handle) return undefined;
  try {
    const [text, info] = await Promise.all([handle.readFile("utf8"), handle.stat()]);
    return { text, modifiedAt: info.mtime };
  } finally {
    await handle.close();
  }
}

/** `lstat` of a session entry (never its link's target); undefined when it does not exist. */
export async function lstatSessionEntry(path: string): Promise<Stats | undefined> {
  return lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
}

/** The path the descriptor really has: Linux tells it; elsewhere realpath, if it names the same inode. */
async function whereOpened(handle: FileHandle, path: string, info: Stats): Promise<string> {
  try {
    return await readlink(`/proc/self/fd/${handle.fd}`);
  } catch {
    const resolved = await realpath(path);
    const now = await lstat(resolved);
    if (now.ino !== info.ino || now.dev !== info.dev) return "";
    return resolved;
  }
}
