import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { AppendLog } from "../jsonl/index.js";

/**
 * A handled delivery: when it may be forgotten (epoch ms) and, for a request whose response has not
 * been accepted by the gateway yet, that signed response (sent again on redelivery).
 */
export interface HandledEntry {
  expiresAt: number;
  response?: Record<string, unknown>;
}

/** Below this many lines the file is never rewritten: compaction would cost more than it saves. */
const MIN_COMPACT_LINES = 1_000;

/**
 * The on-disk half of the delivery ledger: `<state root>/<agent-id>/handled.log`, one JSON line
 * per delivery handed to the application: `[expiresAt, "id"]`, or `[expiresAt, "id", response]`
 * while a request's signed response waits for the gateway's acceptance. The last line of an id
 * wins.
 *
 * Why an append-only file rather than a database or a JSON document rewritten per message: an
 * append is one small write at the end, so the hot path stays cheap, and a crash can only leave a
 * torn *last* line, which `load` skips — every complete line is a delivery that was handled. Each
 * line is written the moment the ledger asks (a `write(2)` before `append` returns, so a `kill -9`
 * right after loses nothing), and its promise resolves once it is on disk: an fdatasync shared by
 * every line written meanwhile (a group commit: measured, this costs less per line than SQLite in
 * WAL mode with `synchronous=FULL`, and it flushes on the thread pool, not the event loop).
 *
 * The file is rewritten (temp file + rename, so a crash leaves the old or the new one, never a mix)
 * only when it holds more than twice the live entries: expired and evicted ids are dropped then.
 * The rewrite runs beside the appends, never in front of them; lines appended while it runs are
 * appended again to the new file. Other processes of the same agent may append too, so the file is
 * a shared-writers `AppendLog` (each append opens it by path, and ends a torn line first).
 */
export class HandledLog {
  readonly file: string;
  private readonly log: AppendLog;
  private lines = 0;
  private compaction: Promise<void> | undefined;
  /** The durability of the latest append (a group fsync covers every line written before it). */
  private latest: Promise<void> = Promise.resolve();
  /** Lines appended while a compaction runs: appended again once the new file is in place. */
  private duringCompaction: string[] | undefined;

  constructor(
    root: string,
    agentId: string,
    /** The entries the ledger keeps in memory, for compaction. */
    private readonly live: { count(): number; entries(): Iterable<[string, HandledEntry]> },
    private readonly keep: { capacity: number },
  ) {
    this.file = join(root, agentId, "handled.log");
    this.log = AppendLog.shared(this.file, { fileMode: 0o600, dirMode: 0o700, fsync: true, keepOpen: true });
  }

  /** The unexpired entries in expiry order, at most `capacity` (those that expire last). */
  async load(now = Date.now()): Promise<[string, HandledEntry][]> {
    const { entries, lines } = await this.read(now);
    this.lines = lines;
    // Open the file before the first delivery: its record then costs what every later one does.
    this.log.prepare();
    return newest(entries, this.keep.capacity);
  }

  /** Writes the line now; resolves once it is on disk. */
  append(id: string, entry: HandledEntry): Promise<void> {
    const line = `${JSON.stringify(entry.response ? [entry.expiresAt, id, entry.response] : [entry.expiresAt, id])}\n`;
    this.duringCompaction?.push(line);
    const durable = this.log.append(line);
    this.latest = durable.catch(() => undefined);
    this.lines++;
    if (!this.compaction && this.lines > Math.max(MIN_COMPACT_LINES, 2 * this.live.count())) {
      this.compaction = this.compact()
        .catch(() => undefined) // the file stays as it was: appends go on, the next one tries again
        .finally(() => {
          this.compaction = undefined;
        });
    }
    return durable;
  }

  /** Waits until every line appended so far is on disk (or failed) and a compaction under way has finished, then closes the file. */
  async close(): Promise<void> {
    await this.latest;
    await this.compaction;
    await this.log.close();
  }

  /**
   * Rewrites the file with the live entries. What the file holds is merged in first, so lines
   * another process of the same agent appended (e.g. `acp send` beside the real consumer) survive.
   */
  private async compact(): Promise<void> {
    this.duringCompaction = [];
    try {
      const now = Date.now();
      const merged = new Map((await this.read(now)).entries);
      for (const [id, entry] of this.live.entries()) if (entry.expiresAt > now) merged.set(id, entry);
      const kept = newest([...merged], this.keep.capacity);
      await this.log.rewrite(kept.map(([id, entry]) => `${JSON.stringify(lineOf(id, entry))}\n`).join(""));
      const again = this.duringCompaction;
      this.duringCompaction = undefined;
      if (again.length > 0) await this.log.append(again.join(""));
      this.lines = kept.length + again.length;
    } finally {
      this.duringCompaction = undefined;
    }
  }

  private async read(now: number): Promise<{ entries: [string, HandledEntry][]; lines: number }> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { entries: [], lines: 0 };
      throw err;
    }
    const entries = new Map<string, HandledEntry>();
    const lines = text.split("\n");
    for (const line of lines) {
      const parsed = parseLine(line);
      if (!parsed) continue; // a torn last line, or foreign
      const [id, entry] = parsed;
      if (entry.expiresAt <= now) entries.delete(id);
      else entries.set(id, entry); // the last line of an id wins
    }
    return { entries: [...entries], lines: lines.length - 1 };
  }
}

function lineOf(id: string, entry: HandledEntry): unknown[] {
  return entry.response ? [entry.expiresAt, id, entry.response] : [entry.expiresAt, id];
}

/** The `capacity` entries that expire last, in expiry order. */
function newest(entries: [string, HandledEntry][], capacity: number): [string, HandledEntry][] {
  return entries.sort((a, b) => a[1].expiresAt - b[1].expiresAt).slice(-capacity);
}

function parseLine(line: string): [string, HandledEntry] | undefined {
  if (line === "") return undefined;
  try {
    const value: unknown = JSON.parse(line);
    if (Array.isArray(value) && typeof value[0] === "number" && typeof value[1] === "string") {
      const response = value[2];
      return typeof response === "object" && response !== null && !Array.isArray(response)
        ? [value[1], { expiresAt: value[0], response: response as Record<string, unknown> }]
        : [value[1], { expiresAt: value[0] }];
    }
  } catch {
    // torn or foreign: ignored
  }
  return undefined;
}
