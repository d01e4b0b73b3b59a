/**
 * One append-only JSONL file: the write path shared by the audit log, the client's handled-message
 * log and the coordination event log. Every append is whole lines, written with one write(2) on an
 * O_APPEND descriptor, so concurrent writers never interleave inside a line and a crash can only
 * leave a torn *last* line. What differs between the users is chosen here, not re-implemented:
 *
 * - `writers: "single"` — one process owns the file (take `acquireWriterLock` first). The
 *   descriptor stays open; a torn last line found at open is moved aside (`<file>.torn-<time>`);
 *   a failed write is cut back to the last whole line, or, if that fails too, the log refuses
 *   further appends. Appends are queued, so they land in call order.
 * - `writers: "shared"` — any number of processes append. Each append opens the file by path (so
 *   it follows a `rewrite` by another process) and first ends a fragment a crashed writer left, so
 *   its own line starts on a line of its own. Nothing is truncated: the bytes may be a line in flight.
 * - `fsync` — fdatasync after each append, and sync the directory when the file is created or
 *   rewritten. Without it a killed process loses nothing the kernel has; a power loss may lose the
 *   last lines.
 */
import { closeSync, fdatasyncSync, fstatSync, openSync, readSync, writeSync } from "node:fs";
import { type FileHandle, mkdir, open, rename } from "node:fs/promises";
import { dirname } from "node:path";
import { AppendLogError } from "./errors.js";
import { fileSize, NEWLINE, repairTornTail, type TornTailRecovery } from "./lines.js";

export interface AppendLogOptions {
  /** Mode of the file when this log creates it. Default 0o600. */
  fileMode?: number;
  /** Create the directory (and its parents) with this mode before the first write. Default: it must exist. */
  dirMode?: number;
  /** Durable appends: fdatasync each one; sync the directory when the file is created or rewritten. */
  fsync?: boolean;
}

export interface SingleWriterOptions extends AppendLogOptions {
  /** Stamps the name of a torn tail moved aside at open. Default: the system clock. */
  clock?: () => Date;
}

export class AppendLog {
  /** Single writer: the open descriptor and the size of its whole lines. */
  private fh: FileHandle | undefined;
  private size = 0;
  private failure: Error | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private dirReady: boolean;
  private closed = false;

  private constructor(
    readonly file: string,
    readonly writers: "single" | "shared",
    private readonly options: AppendLogOptions,
    /** Single writer: what `open` moved aside after a crash, if anything. */
    readonly recovered?: TornTailRecovery,
  ) {
    this.dirReady = options.dirMode === undefined;
  }

  /** Opens `file` for its only writer (hold the writer lock); repairs a torn last line first. */
  static async single(file: string, options: SingleWriterOptions = {}): Promise<AppendLog> {
    if (options.dirMode !== undefined) await mkdir(dirname(file), { recursive: true, mode: options.dirMode });
    const created = (await fileSize(file)) === 0;
    const recovered = created
      ? undefined
      : await repairTornTail(file, (options.clock ?? (() => new Date()))());
    const log = new AppendLog(file, "single", options, recovered);
    log.dirReady = true;
    await log.openDescriptor();
    if (created && options.fsync) await syncDirectory(dirname(file));
    return log;
  }

  /** A file other processes may append to as well; nothing is opened until the first append. */
  static shared(file: string, options: AppendLogOptions = {}): AppendLog {
    return new AppendLog(file, "shared", options);
  }

  /** Appends whole lines (`text` ends in a newline) in one write; resolves once written (and synced). */
  append(text: string | Buffer): Promise<void> {
    if (this.closed) return Promise.reject(new AppendLogError("the log is closed", this.file));
    const bytes = typeof text === "string" ? Buffer.from(text, "utf8") : text;
    if (bytes.length === 0 || bytes[bytes.length - 1] !== NEWLINE) {
      return Promise.reject(
        new AppendLogError("an append must be whole lines, ending in a newline", this.file),
      );
    }
    if (this.writers === "shared") return this.appendShared(bytes);
    return this.enqueue(() => this.appendSingle(bytes));
  }

  /** Replaces the whole content (temp file + rename: a crash leaves the old or the new file, never a mix). */
  rewrite(text: string | Buffer): Promise<void> {
    const replace = async () => {
      if (!this.dirReady) await this.ensureDir();
      const temp = `${this.file}.${process.pid}.tmp`;
      const handle = await open(temp, "w", this.options.fileMode ?? 0o600);
      try {
        await handle.writeFile(text);
        if (this.options.fsync) await handle.datasync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.file);
      if (this.options.fsync) await syncDirectory(dirname(this.file));
      if (this.writers === "single") {
        await this.fh?.close();
        await this.openDescriptor();
      }
    };
    return this.writers === "shared" ? replace() : this.enqueue(replace);
  }

  /** Refuses new appends, lets the queued ones finish, then closes the descriptor. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.fh?.close();
    this.fh = undefined;
  }

  /** Set once a failed write could not be cut back: the file may end in part of a line. */
  get unusable(): Error | undefined {
    return this.failure;
  }

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new AppendLogError("the log is closed", this.file));
    const done = this.queue.then(task);
    this.queue = done.catch(() => undefined);
    return done;
  }

  private async appendSingle(bytes: Buffer): Promise<void> {
    if (this.failure) {
      throw new AppendLogError(
        `unusable after a failed write (${this.failure.message}); reopen it`,
        this.file,
      );
    }
    const fh = this.fh as FileHandle;
    try {
      // A synchronous write of a few lines to the page cache takes microseconds, far less than a
      // thread-pool round trip; only the optional fdatasync, which waits for the disk, is asynchronous.
      let offset = 0;
      while (offset < bytes.length) offset += writeSync(fh.fd, bytes, offset, bytes.length - offset);
      if (this.options.fsync) await fh.datasync();
    } catch (err) {
      // The write may have left part of a line: cut back to the last whole one, or stop.
      await fh.truncate(this.size).catch(() => {
        this.failure = err as Error;
      });
      throw err;
    }
    this.size += bytes.length;
  }

  private async appendShared(bytes: Buffer): Promise<void> {
    if (!this.dirReady) await this.ensureDir();
    // Synchronous calls on purpose: each takes microseconds on a local file, and the thread-pool
    // round trips of the async API would cost several times the write itself.
    // a+ = O_APPEND|O_CREAT|O_RDWR: every write lands at the end, and we can peek at the last byte.
    const fd = openSync(this.file, "a+", this.options.fileMode ?? 0o600);
    try {
      // A torn line left by a crashed writer is ended first, so ours starts on a line of its own.
      const out = (await endsInFragment(fd)) ? Buffer.concat([Buffer.from("\n"), bytes]) : bytes;
      // One write only: a second one could land after another writer's line.
      const written = writeSync(fd, out);
      if (written !== out.length) {
        throw new AppendLogError(`short write (${written} of ${out.length} bytes)`, this.file);
      }
      if (this.options.fsync) fdatasyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  private async openDescriptor(): Promise<void> {
    this.fh = await open(this.file, "a", this.options.fileMode ?? 0o600);
    this.size = (await this.fh.stat()).size;
  }

  private async ensureDir(): Promise<void> {
    await mkdir(dirname(this.file), { recursive: true, mode: this.options.dirMode });
    this.dirReady = true;
  }
}

/**
 * True when the file ends in a fragment that stays: another writer's line caught mid-copy finishes
 * within microseconds, so the fragment is looked at twice. (Should the second look still race, the
 * cost is one blank line, which readers pass over.)
 */
async function endsInFragment(fd: number): Promise<boolean> {
  const lastByte = (): { size: number; byte: number | undefined } => {
    const { size } = fstatSync(fd);
    if (size === 0) return { size, byte: undefined };
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    return { size, byte: last[0] };
  };
  const first = lastByte();
  if (first.byte === undefined || first.byte === NEWLINE) return false;
  await new Promise((resolve) => setTimeout(resolve, 2));
  const second = lastByte();
  return second.size === first.size && second.byte !== NEWLINE;
}

/** A new or renamed file's directory entry is only durable once the directory itself is synced. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
