import { stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { AuditEntrySchema, type AuditHead, computeEntryHash, describeIssues, GENESIS_HASH } from "./entry.js";
import {
  AuditLogError,
  agentDir,
  listAuditAgents,
  listMonthFiles,
  monthFileName,
  monthOf,
  nextMonth,
} from "./files.js";
import { readLines } from "../jsonl/index.js";

export type AuditProblemReason =
  | "bad-json"
  | "schema"
  | "hash-mismatch"
  | "seq-gap"
  | "seq-order"
  | "prev-mismatch"
  | "missing-month"
  | "missing-start"
  | "wrong-month"
  | "torn-line";

/** The first place the chain breaks: which file, which line (1-based), and why. */
export interface AuditProblem {
  reason: AuditProblemReason;
  file: string;
  line: number;
  message: string;
}

export interface AuditVerification {
  agent: string;
  dir: string;
  ok: boolean;
  files: number;
  /** Entries checked and found intact (all of them when ok). */
  entries: number;
  /** The last intact entry: note it down to detect a later truncation of the log's end. */
  head: AuditHead | null;
  problem?: AuditProblem;
  /** An incomplete last line left by a crash: not an entry, and moved aside when the log is next opened. */
  tornTail?: { file: string; line: number; bytes: number };
}

export interface VerifyOptions {
  /** Called after each month file, for progress output. */
  onProgress?: (file: string, entriesSoFar: number) => void;
}

/**
 * Walks an agent's log (`<root>/<agent>`) in order and stops at the first broken or missing line:
 * bad JSON, schema violation, an entry whose hash does not match its content, a seq gap (deleted
 * line), a seq going back (reordered or repeated line), a `prev` that does not chain, a month file
 * missing from the chain, or an entry filed under an earlier month than its timestamp.
 * Removing entries from the very end cannot be seen from the file alone: compare `head` to one noted earlier.
 */
export async function verifyAudit(dir: string, options: VerifyOptions = {}): Promise<AuditVerification> {
  const isDir = await stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new AuditLogError(`no audit log at ${dir}`);
  const files = await listMonthFiles(dir);
  const result: AuditVerification = {
    agent: basename(dir),
    dir,
    ok: true,
    files: files.length,
    entries: 0,
    head: null,
  };
  const fail = (
    reason: AuditProblemReason,
    file: string,
    line: number,
    message: string,
  ): AuditVerification => ({
    ...result,
    ok: false,
    problem: { reason, file, line, message },
  });

  let expectedSeq = 1;
  let prevHash = GENESIS_HASH;
  let prevLocation = "";
  let prevMonth: string | undefined;
  for (const [index, name] of files.entries()) {
    const path = join(dir, name);
    const month = name.slice(0, 7);
    let firstInFile = true;
    for await (const line of readLines(path)) {
      if (!line.complete) {
        if (index !== files.length - 1) {
          return fail(
            "torn-line",
            path,
            line.number,
            "incomplete line (no newline) in a month file that is not the newest",
          );
        }
        result.tornTail = { file: path, line: line.number, bytes: Buffer.byteLength(line.text) };
        break;
      }
      let raw: unknown;
      try {
        raw = JSON.parse(line.text);
      } catch (err) {
        return fail("bad-json", path, line.number, `not JSON (${(err as Error).message})`);
      }
      const parsed = AuditEntrySchema.safeParse(raw);
      if (!parsed.success) return fail("schema", path, line.number, describeIssues(parsed.error));
      const entry = parsed.data;
      if (computeEntryHash(raw as Record<string, unknown>) !== entry.hash) {
        return fail(
          "hash-mismatch",
          path,
          line.number,
          "the entry's content does not match its hash (edited)",
        );
      }
      if (entry.seq !== expectedSeq) {
        const missing =
          entry.seq - expectedSeq === 1
            ? `entry ${expectedSeq} is`
            : `entries ${expectedSeq}–${entry.seq - 1} are`;
        if (result.entries === 0) {
          return fail(
            "missing-start",
            path,
            line.number,
            `the log starts at seq ${entry.seq}: ${missing} missing (an earlier month file or the first lines were deleted)`,
          );
        }
        if (
          entry.seq > expectedSeq &&
          firstInFile &&
          prevMonth !== undefined &&
          nextMonth(prevMonth) !== month
        ) {
          return fail(
            "missing-month",
            path,
            line.number,
            `${missing} missing: ${describeMonthsBetween(prevMonth, month)} deleted, or lines cut from the end of ${monthFileName(prevMonth)}`,
          );
        }
        if (entry.seq > expectedSeq) {
          return fail(
            "seq-gap",
            path,
            line.number,
            `expected seq ${expectedSeq}, found ${entry.seq}: ${missing} missing before this line (deleted, or lines reordered)`,
          );
        }
        return fail(
          "seq-order",
          path,
          line.number,
          `expected seq ${expectedSeq}, found ${entry.seq}: an entry is repeated or lines were reordered`,
        );
      }
      if (entry.prev !== prevHash) {
        return fail(
          "prev-mismatch",
          path,
          line.number,
          result.entries === 0
            ? "the first entry's prev is not the genesis hash"
            : `prev does not match the hash of ${prevLocation} (that entry was altered or replaced)`,
        );
      }
      const entryMonth = monthOf(new Date(entry.ts));
      if (entryMonth > month) {
        return fail(
          "wrong-month",
          path,
          line.number,
          `ts ${entry.ts} belongs in ${monthFileName(entryMonth)}, not ${name}`,
        );
      }
      expectedSeq++;
      prevHash = entry.hash;
      prevLocation = `${name} line ${line.number}`;
      result.entries++;
      result.head = { seq: entry.seq, hash: entry.hash };
      firstInFile = false;
    }
    prevMonth = month;
    options.onProgress?.(path, result.entries);
  }
  return result;
}

/** Verifies one agent's log, or every agent's under the root. */
export async function verifyAuditRoot(
  options: { root?: string; agent?: string } & VerifyOptions = {},
): Promise<AuditVerification[]> {
  const agents = options.agent !== undefined ? [options.agent] : await listAuditAgents(options.root);
  const results: AuditVerification[] = [];
  for (const agent of agents) results.push(await verifyAudit(agentDir(options.root, agent), options));
  return results;
}

function describeMonthsBetween(from: string, to: string): string {
  const months: string[] = [];
  for (let m = nextMonth(from); m < to; m = nextMonth(m)) months.push(monthFileName(m));
  if (months.length === 1) return `${months[0]} was`;
  if (months.length <= 3) return `one of ${months.join(", ")} was`;
  return `month files between ${monthFileName(from)} and ${monthFileName(to)} were`;
}
