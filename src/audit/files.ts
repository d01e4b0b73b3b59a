import { readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  AppendLogError,
  acquireWriterLock as acquireLock,
  acquireWriterLockWithin as acquireLockWithin,
} from "../jsonl/index.js";
import { AuditAgentId } from "./entry.js";

export type { TornTailRecovery } from "../jsonl/index.js";

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
  return monthOfIso(date.toISOString());
}

/** `YYYY-MM` of an ISO 8601 UTC timestamp (`Date.prototype.toISOString`'s form). */
export function monthOfIso(ts: string): string {
  return ts.slice(0, 7);
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

/**
 * One process writes an agent's log at a time: two writers would both chain onto the same head and
 * fork it. The lock (`writer.lock`, the owner's pid) covers all the month files; a stale one is
 * taken over. With `waitMs`, waits that long for another process to let go (shared writers).
 */
export async function acquireWriterLock(dir: string, waitMs?: number): Promise<string> {
  const path = join(dir, LOCK_FILE);
  try {
    if (waitMs === undefined) await acquireLock(path, dir);
    else await acquireLockWithin(path, dir, waitMs);
  } catch (err) {
    throw err instanceof AppendLogError ? new AuditLogError(err.message) : err;
  }
  return path;
}
