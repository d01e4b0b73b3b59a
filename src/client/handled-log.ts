import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { AppendLog } from "../jsonl/index.js";

/** A handled delivery id and the time (epoch ms) after which it may be forgotten. */
export type HandledEntry = [id: string, expiresAt: number];

/** Below this many lines the file is never rewritten: compaction would cost more than it saves. */
const MIN_COMPACT_LINES = 1_000;

/**
 * The on-disk half of the delivery ledger: `<state root>/<agent-id>/handled.log`, one JSON line
 * `[expiresAt, "id"]` per delivery handed to the application.
 *
 * Why an append-only file rather than a database or a JSON document rewritten per message: an
 * append is one small write at the end, so the hot path stays cheap (lines written in the same
 * turn go out in one write), and a crash can only leave a torn *last* line, which `load` skips —
 * every complete line is a delivery that was handled. The file is rewritten (temp file + rename,
 * so a crash leaves the old or the new one, never a mix) only when it holds more than twice the
 * live entries: expired and evicted ids are dropped then. Other processes of the same agent may
 * append too, so the file is a shared-writers `AppendLog` (each append opens it by path, and ends
 * a torn line first). No fsync: a killed process loses nothing the kernel already has; after a
 * power loss the last ids may be missing, and those deliveries are handled again (at-least-once,
 * never lost).
 */
export class HandledLog {
  readonly file: string;
  private readonly log: AppendLog;
  private lines = 0;
  private tail: Promise<void> = Promise.resolve();
  private batch: { lines: string[]; written: Promise<void> } | undefined;

  constructor(
    root: string,
    agentId: string,
    /** The ids the ledger keeps in memory (id → expiresAt), for compaction. */
    private readonly live: ReadonlyMap<string, number>,
    private readonly keep: { capacity: number },
  ) {
    this.file = join(root, agentId, "handled.log");
    this.log = AppendLog.shared(this.file, { fileMode: 0o600, dirMode: 0o700 });
  }

  /** The unexpired entries in expiry order, at most `capacity` (those that expire last). */
  async load(now = Date.now()): Promise<HandledEntry[]> {
    const { entries, lines } = await this.read(now);
    this.lines = lines;
    return newest(entries, this.keep.capacity);
  }

  /** Records `id`; resolves once the line is written (batched with the others of this turn). */
  append(id: string, expiresAt: number): Promise<void> {
    if (!this.batch) {
      const batch: { lines: string[]; written: Promise<void> } = {
        lines: [],
        written: this.tail
          .catch(() => undefined)
          .then(() => {
            if (this.batch === batch) this.batch = undefined;
            return this.write(batch.lines);
          }),
      };
      this.batch = batch;
      this.tail = batch.written;
    }
    this.batch.lines.push(`${JSON.stringify([expiresAt, id])}\n`);
    return this.batch.written;
  }

  /** Resolves when everything appended so far is written (or failed). */
  async flush(): Promise<void> {
    await this.tail.catch(() => undefined);
  }

  private async write(lines: string[]): Promise<void> {
    await this.log.append(lines.join(""));
    this.lines += lines.length;
    if (this.lines > Math.max(MIN_COMPACT_LINES, 2 * this.live.size)) await this.compact();
  }

  /**
   * Rewrites the file with the live entries. What the file holds is merged in first, so lines
   * another process of the same agent appended (e.g. `acp send` beside the real consumer) survive.
   */
  private async compact(): Promise<void> {
    const now = Date.now();
    const merged = new Map<string, number>();
    for (const [id, expiresAt] of [...(await this.read(now)).entries, ...this.live]) {
      if (expiresAt > now) merged.set(id, Math.max(expiresAt, merged.get(id) ?? 0));
    }
    const kept = newest([...merged], this.keep.capacity);
    await this.log.rewrite(kept.map((entry) => `${JSON.stringify([entry[1], entry[0]])}\n`).join(""));
    this.lines = kept.length;
  }

  private async read(now: number): Promise<{ entries: HandledEntry[]; lines: number }> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { entries: [], lines: 0 };
      throw err;
    }
    const entries = new Map<string, number>();
    const lines = text.split("\n");
    for (const line of lines) {
      const entry = parseLine(line);
      if (!entry || entry[1] <= now) continue; // a torn last line, or expired
      entries.set(entry[0], Math.max(entry[1], entries.get(entry[0]) ?? 0));
    }
    return { entries: [...entries], lines: lines.length - 1 };
  }
}

/** The `capacity` entries that expire last, in expiry order. */
function newest(entries: HandledEntry[], capacity: number): HandledEntry[] {
  return entries.sort((a, b) => a[1] - b[1]).slice(-capacity);
}

function parseLine(line: string): HandledEntry | undefined {
  if (line === "") return undefined;
  try {
    const value: unknown = JSON.parse(line);
    if (Array.isArray(value) && typeof value[0] === "number" && typeof value[1] === "string") {
      return [value[1], value[0]];
    }
  } catch {
    // torn or foreign: ignored
  }
  return undefined;
}
