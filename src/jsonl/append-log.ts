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
 *   The write happens before `append` returns (not on a later turn), so a line is in the kernel
 *   the moment its caller asked for it.
 * - `fsync` — appends are durable once their promise resolves: fdatasync (a single writer: after
 *   each append; shared writers: one fdatasync, on the thread pool, covers every line written while
 *   the previous one ran — a group commit), and the directory is synced when the file is created or
 *   rewritten. Without it a killed process loses nothing the kernel has; a power loss may lose the
 *   last lines.
 */
import { closeSync, fstatSync, mkdirSync, openSync, readSync, writeSync } from "node:fs";
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
  /**
   * Shared writers: keep the descriptor open between appends (call `close()` when done) instead of
   * opening the file by path each time. An append then costs an fstat and the write; a rewrite by
   * another process is still followed (the old file's link count drops to 0, and it is reopened).
   */
  keepOpen?: boolean;
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
  /** Shared writers with keepOpen: the descriptor, and the file's size after our last append through it. */
  private sharedFd: number | undefined;
  private sharedEnd = -1;
  /** Shared writers with fsync: the latest fdatasync queued or running, and one not started yet (joinable). */
  private syncTail: Promise<void> = Promise.resolve();
  private syncQueued: Promise<void> | undefined;

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

  /**
   * Shared writers with keepOpen: creates the directory and opens the file now, so the first
   * append costs what every later one does (an fstat and the write).
   */
  prepare(): void {
    if (this.writers !== "shared" || !this.options.keepOpen || this.closed) return;
    if (!this.dirReady) {
      mkdirSync(dirname(this.file), { recursive: true, mode: this.options.dirMode });
      this.dirReady = true;
    }
    const { size } = this.sharedDescriptor();
    // A file that ends in a whole line (or is empty) needs no look at its last byte before our first line.
    if (size === 0 || lastByte(this.sharedFd as number, size) === NEWLINE) this.sharedEnd = size;
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
      } else {
        this.dropSharedDescriptor(); // it is the replaced file's
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
    await this.syncTail.catch(() => undefined);
    this.dropSharedDescriptor();
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

  private appendShared(bytes: Buffer): Promise<void> {
    // Synchronous calls on purpose: each takes microseconds on a local file, the thread-pool round
    // trips of the async API would cost several times the write itself, and a busy pool would hold
    // the line back for as long as it is busy.
    let fd = -1;
    let keep = false;
    try {
      if (!this.dirReady) {
        mkdirSync(dirname(this.file), { recursive: true, mode: this.options.dirMode });
        this.dirReady = true;
      }
      const opened = this.sharedDescriptor();
      fd = opened.fd;
      keep = this.options.keepOpen === true;
      // Only a file another writer appended to since our last append can end in part of a line.
      if (opened.size !== this.sharedEnd && opened.size > 0 && lastByte(fd, opened.size) !== NEWLINE) {
        const appended = this.appendAfterFragment(fd, opened.size, bytes, keep);
        fd = -1; // appendAfterFragment closes it (unless kept)
        return appended;
      }
      writeWhole(fd, bytes, this.file);
      this.sharedEnd = keep ? opened.size + bytes.length : -1;
    } catch (err) {
      if (keep) this.dropSharedDescriptor();
      return Promise.reject(err);
    } finally {
      if (fd >= 0 && !keep) closeSync(fd);
    }
    return this.options.fsync ? this.groupSync() : Promise.resolve();
  }

  /**
   * The descriptor to append through and the file's size now. a+ = O_APPEND|O_CREAT|O_RDWR: every
   * write lands at the end, and we can peek at the last byte. A kept descriptor whose file another
   * process replaced (a rewrite: the old file has no link left) is reopened by path.
   */
  private sharedDescriptor(): { fd: number; size: number } {
    if (this.sharedFd !== undefined) {
      const { nlink, size } = fstatSync(this.sharedFd);
      if (nlink > 0) return { fd: this.sharedFd, size };
      this.dropSharedDescriptor();
    }
    const fd = openSync(this.file, "a+", this.options.fileMode ?? 0o600);
    if (this.options.keepOpen) this.sharedFd = fd;
    return { fd, size: fstatSync(fd).size };
  }

  private dropSharedDescriptor(): void {
    if (this.sharedFd === undefined) return;
    closeSync(this.sharedFd);
    this.sharedFd = undefined;
    this.sharedEnd = -1;
  }

  /**
   * The file ends in part of a line: another writer's line caught mid-copy finishes within
   * microseconds, so it is looked at again; a fragment that stays (a crashed writer's) is ended
   * first, so ours starts on a line of its own. (Should the second look still race, the cost is
   * one blank line, which readers pass over.)
   */
  private async appendAfterFragment(fd: number, size: number, bytes: Buffer, keep: boolean): Promise<void> {
    try {
      await new Promise((resolve) => setTimeout(resolve, 2));
      const now = fstatSync(fd).size;
      const torn = now === size && lastByte(fd, now) !== NEWLINE;
      // One write only: a second one could land after another writer's line.
      writeWhole(fd, torn ? Buffer.concat([Buffer.from("\n"), bytes]) : bytes, this.file);
      this.sharedEnd = -1;
    } finally {
      if (!keep) closeSync(fd);
    }
    if (this.options.fsync) await this.groupSync();
  }

  /**
   * Resolves once an fdatasync that started after this call has finished. Calls made while one
   * runs share the next: every line written meanwhile is made durable by one disk flush, on the
   * thread pool, while the event loop goes on. fdatasync flushes the file, whichever descriptor
   * asks, so a descriptor opened for it covers what the others wrote.
   */
  private groupSync(): Promise<void> {
    if (this.syncQueued) return this.syncQueued;
    const queued = this.syncTail
      .catch(() => undefined)
      .then(async () => {
        if (this.syncQueued === queued) this.syncQueued = undefined;
        const handle = await open(this.file, "r");
        try {
          await handle.datasync();
        } finally {
          await handle.close();
        }
      });
    this.syncQueued = queued;
    this.syncTail = queued;
    return queued;
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

/** The last byte of a file of `size` bytes (size > 0). */
function lastByte(fd: number, size: number): number | undefined {
  const last = Buffer.alloc(1);
  readSync(fd, last, 0, 1, size - 1);
  return last[0];
}

/** One write(2) of all of `bytes` on an O_APPEND descriptor; a short write is an error. */
function writeWhole(fd: number, bytes: Buffer, file: string): void {
  const written = writeSync(fd, bytes);
  if (written !== bytes.length) {
    throw new AppendLogError(`short write (${written} of ${bytes.length} bytes)`, file);
  }
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
