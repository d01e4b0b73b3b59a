import { writeSync } from "node:fs";
import { type FileHandle, mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import {
  type AuditEntry,
  type AuditEntryInput,
  AuditEntryInputSchema,
  AuditEntrySchema,
  type AuditHead,
  computeEntryHash,
  describeIssues,
  GENESIS_HASH,
  sealEntry,
} from "./entry.js";
import {
  AuditLogError,
  acquireWriterLock,
  agentDir,
  fileSize,
  listMonthFiles,
  monthFileName,
  monthOf,
  readLastCompleteLine,
  releaseWriterLock,
  repairTornTail,
  type TornTailRecovery,
} from "./files.js";

export interface AuditLogOptions {
  agent: string;
  /** Default: `$ACP_AUDIT_DIR`, else `./.acp/audit`. */
  root?: string;
  /** Injectable for tests; entries are stamped and filed by this clock (UTC months). */
  clock?: () => Date;
  /** fdatasync after every append (and fsync the directory when a month file is created). */
  fsync?: boolean;
}

/**
 * An agent's append-only audit log: `<root>/<agent>/YYYY-MM.jsonl`, a hash chain across months.
 *
 * One process owns an agent's log (a lock file enforces it). Within that process appends are queued,
 * so concurrent callers get consecutive `seq`s. Each entry is one `write` of one whole line on an
 * O_APPEND descriptor; an incomplete line left by a crash is moved aside on the next `open`.
 */
export class AuditLog {
  private queue: Promise<void> = Promise.resolve();
  private pending: PendingAppend[] = [];
  private fh: FileHandle | undefined;
  private size = 0;
  private failure: Error | undefined;
  private closed = false;

  private constructor(
    readonly agent: string,
    readonly dir: string,
    private readonly lockPath: string,
    private readonly clock: () => Date,
    private readonly fsync: boolean,
    private month: string | undefined,
    private chainHead: AuditHead,
    /** What `open` had to repair after a crash, if anything. */
    readonly recovered: TornTailRecovery | undefined,
  ) {}

  static async open(options: AuditLogOptions): Promise<AuditLog> {
    const dir = agentDir(options.root, options.agent);
    const clock = options.clock ?? (() => new Date());
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const lockPath = await acquireWriterLock(dir);
    try {
      const files = await listMonthFiles(dir);
      const latest = files.at(-1);
      // Only the newest file is ever written, so only it can end in a torn line.
      const recovered = latest ? await repairTornTail(join(dir, latest), clock()) : undefined;
      const head = await findHead(dir, files);
      return new AuditLog(
        options.agent,
        dir,
        lockPath,
        clock,
        options.fsync ?? false,
        latest?.slice(0, 7),
        head,
        recovered,
      );
    } catch (err) {
      await releaseWriterLock(lockPath);
      throw err;
    }
  }

  get head(): AuditHead {
    return { ...this.chainHead };
  }

  /**
   * Validates, stamps (`seq`, `ts`, `prev`, `hash`) and appends one entry; resolves once written.
   * Entries appended while an earlier write is under way, or in the same turn of the event loop, are
   * chained in order and leave in one `write` (and one fdatasync): the cost of the syscalls is shared.
   */
  append(input: AuditEntryInput): Promise<AuditEntry> {
    if (this.closed) return Promise.reject(new AuditLogError(`audit log ${this.dir} is closed`));
    const parsed = AuditEntryInputSchema.safeParse(input);
    if (!parsed.success) {
      return Promise.reject(new AuditLogError(`invalid audit entry: ${describeIssues(parsed.error)}`));
    }
    return new Promise<AuditEntry>((resolve, reject) => {
      this.pending.push({ input: parsed.data, resolve, reject });
      // The first entry of a batch queues its write; the write takes whatever is pending by then.
      if (this.pending.length === 1) this.queue = this.queue.then(() => this.writePending());
    });
  }

  /** Refuses new appends, lets the queued ones finish, then closes the file and releases the writer lock. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.fh?.close();
    this.fh = undefined;
    await releaseWriterLock(this.lockPath);
  }

  /** Writes the pending entries in order, one `write` per month file they fall in; never rejects. */
  private async writePending(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    let lines: string[] = [];
    let sealed: Array<{ entry: AuditEntry; settle: PendingAppend }> = [];
    let next = 0;
    try {
      if (this.failure) {
        throw new AuditLogError(
          `audit log ${this.dir} is unusable after a failed write (${this.failure.message}); reopen it`,
        );
      }
      for (; next < batch.length; next++) {
        const item = batch[next]!;
        const now = this.clock();
        // Never go back to an older file, even if the clock steps back across a month boundary.
        const month = this.month !== undefined && this.month > monthOf(now) ? this.month : monthOf(now);
        if (month !== this.month || this.fh === undefined) {
          await this.writeLines(lines, sealed);
          lines = [];
          sealed = [];
          await this.switchTo(month);
        }
        const last = sealed.at(-1)?.entry ?? this.chainHead;
        const entry = sealEntry(item.input, { seq: last.seq + 1, ts: now.toISOString(), prev: last.hash });
        lines.push(`${JSON.stringify(entry)}\n`);
        sealed.push({ entry, settle: item });
      }
      await this.writeLines(lines, sealed);
    } catch (err) {
      // What was sealed but not written, and what was not sealed yet, fails together.
      for (const { settle } of sealed) settle.reject(err);
      for (const item of batch.slice(next)) item.reject(err);
    }
  }

  /** One `write` of consecutive lines to the current file; the chain head moves only once they are written. */
  private async writeLines(
    lines: string[],
    sealed: Array<{ entry: AuditEntry; settle: PendingAppend }>,
  ): Promise<void> {
    if (lines.length === 0) return;
    const data = Buffer.from(lines.length === 1 ? lines[0]! : lines.join(""), "utf8");
    const fh = this.fh!;
    try {
      // A synchronous write of a few small lines to the page cache takes microseconds, far less than
      // a thread-pool round trip; only the optional fdatasync, which waits for the disk, is asynchronous.
      let offset = 0;
      while (offset < data.length) offset += writeSync(fh.fd, data, offset, data.length - offset);
      if (this.fsync) await fh.datasync();
    } catch (err) {
      await this.undoPartialWrite(err as Error);
      throw err;
    }
    this.size += data.length;
    const last = sealed.at(-1)!.entry;
    this.chainHead = { seq: last.seq, hash: last.hash };
    for (const { entry, settle } of sealed) settle.resolve(entry);
    sealed.length = 0;
  }

  /** A failed write may have left part of the line: cut back to the last good size, or stop. */
  private async undoPartialWrite(cause: Error): Promise<void> {
    try {
      await this.fh!.truncate(this.size);
    } catch {
      this.failure = cause;
    }
  }

  private async switchTo(month: string): Promise<void> {
    await this.fh?.close();
    this.fh = undefined;
    const path = join(this.dir, monthFileName(month));
    const created = (await fileSize(path)) === 0;
    this.fh = await open(path, "a", 0o600);
    this.size = (await this.fh.stat()).size;
    this.month = month;
    if (created && this.fsync) {
      // A new file's directory entry is only durable once the directory itself is synced.
      const dirHandle = await open(this.dir, "r");
      try {
        await dirHandle.sync();
      } finally {
        await dirHandle.close();
      }
    }
  }
}

interface PendingAppend {
  input: AuditEntryInput;
  resolve: (entry: AuditEntry) => void;
  reject: (error: unknown) => void;
}

/** The chain's head: the last entry of the newest non-empty month file, checked before we build on it. */
async function findHead(dir: string, files: string[]): Promise<AuditHead> {
  for (let i = files.length - 1; i >= 0; i--) {
    const path = join(dir, files[i]!);
    const line = await readLastCompleteLine(path);
    if (line === undefined) continue;
    const problem = `${path}: the last line is not a valid audit entry, so the log cannot be continued; run \`acp audit verify\``;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      throw new AuditLogError(`${problem} (not JSON)`);
    }
    const parsed = AuditEntrySchema.safeParse(raw);
    if (!parsed.success) throw new AuditLogError(`${problem} (${describeIssues(parsed.error)})`);
    if (computeEntryHash(raw as Record<string, unknown>) !== parsed.data.hash) {
      throw new AuditLogError(`${problem} (hash mismatch)`);
    }
    return { seq: parsed.data.seq, hash: parsed.data.hash };
  }
  return { seq: 0, hash: GENESIS_HASH };
}
