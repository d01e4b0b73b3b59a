import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { AppendLog, readLastCompleteLine, releaseWriterLock, type TornTailRecovery } from "../jsonl/index.js";
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
  listMonthFiles,
  monthFileName,
  monthOfIso,
} from "./files.js";

export interface AuditLogOptions {
  agent: string;
  /** Default: `$ACP_AUDIT_DIR`, else `./.acp/audit`. */
  root?: string;
  /** Injectable for tests; entries are stamped and filed by this clock (UTC months). */
  clock?: () => Date;
  /** fdatasync after every append (and fsync the directory when a month file is created). */
  fsync?: boolean;
  /**
   * "single" (default): this process owns the log while it is open (the writer lock is held for
   * its life; another process's open fails). "shared": several processes of one agent append to
   * it (an `acp inbox --follow` and an `acp send` at once): each batch takes the writer lock, reads
   * the chain's head again, appends and lets go, so the chain stays one line after another.
   */
  writers?: "single" | "shared";
}

/** How long a shared writer waits for another process's append (a few milliseconds each). */
const SHARED_LOCK_WAIT_MS = 10_000;

/**
 * An agent's append-only audit log: `<root>/<agent>/YYYY-MM.jsonl`, a hash chain across months.
 *
 * One process owns an agent's log (a lock file enforces it), or, with `writers: "shared"`, its
 * processes take the lock in turns around each append. Within a process appends are queued, so
 * concurrent callers get consecutive `seq`s. The month file is a single-writer `AppendLog`: the
 * entries of a batch are one append of whole lines, an incomplete line left by a crash is moved aside
 * on the next `open`, and a failed write is cut back (or the log stops: reopen it).
 */
export class AuditLog {
  private queue: Promise<void> = Promise.resolve();
  private pending: PendingAppend[] = [];
  private file: AppendLog | undefined;
  private failure: Error | undefined;
  private closed = false;

  private constructor(
    readonly agent: string,
    readonly dir: string,
    private readonly lockPath: string,
    private readonly clock: () => Date,
    private readonly fsync: boolean,
    private readonly shared: boolean,
    private month: string | undefined,
    private chainHead: AuditHead,
    /** What `open` had to repair after a crash, if anything. */
    readonly recovered: TornTailRecovery | undefined,
    file: AppendLog | undefined,
  ) {
    this.file = file;
  }

  /**
   * Opens (creating it if need be) an agent's log for appending: takes the writer lock, repairs a torn last
   * line a crash left, and reads the chain's head; refuses while another process holds a single-writer log.
   */
  static async open(options: AuditLogOptions): Promise<AuditLog> {
    const dir = agentDir(options.root, options.agent);
    const clock = options.clock ?? (() => new Date());
    const shared = options.writers === "shared";
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const lockPath = shared ? await takeTurn(dir) : await acquireWriterLock(dir);
    let found: Awaited<ReturnType<typeof AuditLog.current>>;
    try {
      found = await AuditLog.current(dir, clock, options.fsync);
    } catch (err) {
      await releaseWriterLock(lockPath);
      throw err;
    }
    if (shared) {
      // A shared log is locked only while it is read or written; a single writer keeps its lock.
      await found.file?.close();
      await releaseWriterLock(lockPath);
    }
    return new AuditLog(
      options.agent,
      dir,
      lockPath,
      clock,
      options.fsync ?? false,
      shared,
      found.month,
      found.head,
      found.file?.recovered,
      shared ? undefined : found.file,
    );
  }

  /** The newest month file (opened to write; a torn last line repaired) and the chain's head. */
  private static async current(dir: string, clock: () => Date, fsync: boolean | undefined) {
    const files = await listMonthFiles(dir);
    const latest = files.at(-1);
    // Only the newest file is ever written, so only it can end in a torn line (repaired here).
    const file = latest ? await AppendLog.single(join(dir, latest), { clock, fsync }) : undefined;
    try {
      return { file, month: latest?.slice(0, 7), head: await findHead(dir, files) };
    } catch (err) {
      await file?.close();
      throw err;
    }
  }

  /** The last entry's `seq` and `hash`: what the next entry chains to. */
  get head(): AuditHead {
    return { ...this.chainHead };
  }

  /**
   * Validates, stamps (`seq`, `ts`, `prev`, `hash`) and appends one entry; resolves once written.
   * Entries appended in the same turn of the event loop, or while an earlier write is under way, are
   * sealed in order when their batch is written and leave in one append (one write, one fdatasync).
   * They are sealed only then, so a failed write never leaves a later entry chained to a missing one.
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
    await this.file?.close();
    this.file = undefined;
    if (!this.shared) await releaseWriterLock(this.lockPath);
  }

  /**
   * Seals and writes the pending entries in order, one append per month file they fall in; never
   * rejects. A shared log's batch takes the writer lock and starts from the chain's head as the
   * file now ends (another process may have appended), and lets go once written.
   */
  private async writePending(): Promise<void> {
    if (!this.shared) return this.writeBatch();
    try {
      await takeTurn(this.dir);
    } catch (err) {
      for (const item of this.pending.splice(0)) item.reject(err);
      return;
    }
    try {
      const found = await AuditLog.current(this.dir, this.clock, this.fsync);
      this.file = found.file;
      this.month = found.month;
      this.chainHead = found.head;
      this.failure = undefined; // the file was opened again (a torn line repaired): it can be written
      await this.writeBatch();
    } catch (err) {
      for (const item of this.pending.splice(0)) item.reject(err);
    } finally {
      await this.file?.close();
      this.file = undefined;
      await releaseWriterLock(this.lockPath);
    }
  }

  private async writeBatch(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    let sealed: SealedAppend[] = [];
    let next = 0;
    try {
      if (this.failure) {
        throw new AuditLogError(
          `audit log ${this.dir} is unusable after a failed write (${this.failure.message}); reopen it`,
        );
      }
      for (; next < batch.length; next++) {
        const item = batch[next]!;
        const ts = this.clock().toISOString();
        // Never go back to an older file, even if the clock steps back across a month boundary.
        const nowMonth = monthOfIso(ts);
        const month = this.month !== undefined && this.month > nowMonth ? this.month : nowMonth;
        if (month !== this.month || this.file === undefined) {
          await this.writeSealed(sealed);
          sealed = [];
          await this.switchTo(month);
        }
        const last = sealed.at(-1)?.entry ?? this.chainHead;
        const entry = sealEntry(item.input, { seq: last.seq + 1, ts, prev: last.hash });
        sealed.push({ entry, line: `${JSON.stringify(entry)}\n`, settle: item });
      }
      await this.writeSealed(sealed);
    } catch (err) {
      // What was sealed but not written, and what was not sealed yet, fails together.
      for (const { settle } of sealed) settle.reject(err);
      for (const item of batch.slice(next)) item.reject(err);
    }
  }

  /** One append of consecutive entries to the current file; the chain head moves only once they are written. */
  private async writeSealed(sealed: SealedAppend[]): Promise<void> {
    if (sealed.length === 0) return;
    const file = this.file as AppendLog;
    const text = sealed.length === 1 ? sealed[0]!.line : sealed.map((s) => s.line).join("");
    try {
      await file.append(text);
    } catch (err) {
      // The lines were cut back unless the file is now unusable; then so is the chain.
      this.failure = file.unusable;
      throw err;
    }
    const last = sealed.at(-1)!.entry;
    this.chainHead = { seq: last.seq, hash: last.hash };
    for (const { entry, settle } of sealed) settle.resolve(entry);
    sealed.length = 0;
  }

  private async switchTo(month: string): Promise<void> {
    await this.file?.close();
    this.file = undefined;
    this.file = await AppendLog.single(join(this.dir, monthFileName(month)), {
      clock: this.clock,
      fsync: this.fsync,
    });
    this.month = month;
  }
}

/** A shared writer's turn at the lock (`<dir>/writer.lock`), waiting for another process's append. */
function takeTurn(dir: string): Promise<string> {
  return acquireWriterLock(dir, SHARED_LOCK_WAIT_MS);
}

interface PendingAppend {
  input: AuditEntryInput;
  resolve: (entry: AuditEntry) => void;
  reject: (error: unknown) => void;
}

interface SealedAppend {
  entry: AuditEntry;
  line: string;
  settle: PendingAppend;
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
