import { createReadStream } from "node:fs";
import { type FileHandle, open, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { AuditAgentId } from "./entry.js";

/**
 * The on-disk layout: `<root>/<agent-id>/YYYY-MM.jsonl`, one file per UTC month, plus the writer's
 * `writer.lock` and any `YYYY-MM.jsonl.torn-<time>` fragments moved aside after a crash.
 */

export const MONTH_FILE = /^(\d{4})-(0[1-9]|1[0-2])\.jsonl$/;
const LOCK_FILE = "writer.lock";

/** Thrown for an unusable audit directory, file or line; the message names the file (and line). */
export class AuditLogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuditLogError";
  }
}

/** `--root`, else `$ACP_AUDIT_DIR`, else `./.acp/audit`, resolved against the working directory. */
export function resolveAuditRoot(root?: string): string {
  return resolve(root ?? process.env.ACP_AUDIT_DIR ?? "./.acp/audit");
}

export function agentDir(root: string | undefined, agent: string): string {
  const parsed = AuditAgentId.safeParse(agent);
  if (!parsed.success)
    throw new AuditLogError(`agent id ${JSON.stringify(agent)} ${parsed.error.issues[0]?.message}`);
  return join(resolveAuditRoot(root), agent);
}

/** `YYYY-MM` of a date, in UTC. */
export function monthOf(date: Date): string {
  return date.toISOString().slice(0, 7);
}

export function monthFileName(month: string): string {
  return `${month}.jsonl`;
}

/** The month after `month` (`2026-12` → `2027-01`). */
export function nextMonth(month: string): string {
  const [year, mon] = month.split("-").map(Number) as [number, number];
  return mon === 12 ? `${year + 1}-01` : `${year}-${String(mon + 1).padStart(2, "0")}`;
}

/** The agent's month files, oldest first (`YYYY-MM` sorts chronologically). Missing directory: none. */
export async function listMonthFiles(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).filter((name) => MONTH_FILE.test(name)).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

/** Agents under a root: sub-directories whose name is a valid agent id. */
export async function listAuditAgents(root?: string): Promise<string[]> {
  const dir = resolveAuditRoot(root);
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries
      .filter((e) => e.isDirectory() && AuditAgentId.safeParse(e.name).success)
      .map((e) => e.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

export interface FileLine {
  /** 1-based line number in the file. */
  number: number;
  text: string;
  /** False only for a final segment without its newline: a torn write or one still in progress. */
  complete: boolean;
}

/** Streams a file's lines. Splits on bytes, so a multi-byte character across chunks stays whole. */
export async function* readLines(path: string): AsyncGenerator<FileLine> {
  let pending: Buffer[] = [];
  let number = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 })) {
    const buf = chunk as Buffer;
    let start = 0;
    for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
      pending.push(buf.subarray(start, nl));
      number++;
      yield { number, text: Buffer.concat(pending).toString("utf8"), complete: true };
      pending = [];
      start = nl + 1;
    }
    if (start < buf.length) pending.push(buf.subarray(start));
  }
  if (pending.length > 0)
    yield { number: number + 1, text: Buffer.concat(pending).toString("utf8"), complete: false };
}

/** Position just after the last newline (0 if none); bytes past it are an incomplete line. */
export async function endOfLastCompleteLine(fh: FileHandle, size: number): Promise<number> {
  const chunkSize = 64 * 1024;
  let end = size;
  while (end > 0) {
    const start = Math.max(0, end - chunkSize);
    const buf = Buffer.alloc(end - start);
    await fh.read(buf, 0, buf.length, start);
    const nl = buf.lastIndexOf(10);
    if (nl !== -1) return start + nl + 1;
    end = start;
  }
  return 0;
}

/** The last complete line of a file (without its newline), or undefined if it has none. */
export async function readLastCompleteLine(path: string): Promise<string | undefined> {
  const fh = await open(path, "r");
  try {
    const end = await endOfLastCompleteLine(fh, (await fh.stat()).size);
    if (end === 0) return undefined;
    const start = await endOfLastCompleteLine(fh, end - 1);
    const buf = Buffer.alloc(end - 1 - start);
    await fh.read(buf, 0, buf.length, start);
    return buf.toString("utf8");
  } finally {
    await fh.close();
  }
}

export interface TornTailRecovery {
  file: string;
  /** Where the incomplete bytes were moved, kept for forensics. */
  movedTo: string;
  bytes: number;
}

/**
 * After a crash mid-write the file may end without a newline. Those bytes are copied aside to
 * `<file>.torn-<time>` and cut off, so the next append starts on a fresh line and readers never see
 * them. Copy first, then truncate: a crash in between only repeats the copy on the next open.
 */
export async function repairTornTail(path: string, now: Date): Promise<TornTailRecovery | undefined> {
  const fh = await open(path, "r");
  let torn: Buffer;
  let keep: number;
  try {
    const size = (await fh.stat()).size;
    keep = await endOfLastCompleteLine(fh, size);
    if (keep === size) return undefined;
    torn = Buffer.alloc(size - keep);
    await fh.read(torn, 0, torn.length, keep);
  } finally {
    await fh.close();
  }
  const movedTo = `${path}.torn-${now.toISOString().replace(/[:.]/g, "-")}`;
  await writeFile(movedTo, torn, { mode: 0o600 });
  await truncate(path, keep);
  return { file: path, movedTo, bytes: torn.length };
}

/** Lock paths this process holds, to tell our own live lock from a stale one left by a crash. */
const heldLocks = new Set<string>();

/**
 * One process owns an agent's log: two writers would both chain onto the same head and fork it.
 * The lock file holds the owner's pid; a lock whose process is gone is stale and taken over.
 */
export async function acquireWriterLock(dir: string): Promise<string> {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fh = await open(path, "wx", 0o600);
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      heldLocks.add(path);
      return path;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    if (heldLocks.has(path)) throw new AuditLogError(`${dir} is already open for writing in this process`);
    const pid = Number.parseInt(await readFile(path, "utf8").catch(() => ""), 10);
    if (pid !== process.pid && Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
      throw new AuditLogError(`${dir} is already open for writing by process ${pid} (lock ${path})`);
    }
    await rm(path, { force: true });
  }
  throw new AuditLogError(`could not take the writer lock ${path}`);
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

export async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
}
