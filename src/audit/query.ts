import { type FSWatcher, watch } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { type AuditEntry, AuditEntrySchema, type AuditHead, describeIssues, peerOf } from "./entry.js";
import {
  AuditLogError,
  agentDir,
  listAuditAgents,
  listMonthFiles,
  monthOf,
  resolveAuditRoot,
} from "./files.js";
import { readLastCompleteLine, readLines } from "../jsonl/index.js";

/** Which entries to return. Dates are ISO 8601 strings or Dates; bounds are inclusive. */
export interface AuditFilter {
  since?: Date | string;
  until?: Date | string;
  /** The other side of the exchange, by agent id or principal id. */
  peer?: string;
  /** request | response | notification | handoff */
  type?: string;
}

export interface ReadAuditOptions extends AuditFilter {
  root?: string;
  /** One agent's log; without it every agent under the root, merged by time. */
  agent?: string;
}

export interface FollowAuditOptions extends AuditFilter {
  root?: string;
  agent: string;
  /** Yield entries with a greater seq; default: only entries appended from now on. */
  afterSeq?: number;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** How often to look for changes when no file-system event arrives. Default 1000 ms. */
  pollIntervalMs?: number;
}

/** An entry with where it was read from. */
export interface AuditRecord {
  agent: string;
  file: string;
  line: number;
  entry: AuditEntry;
}

interface Filter {
  since?: number;
  until?: number;
  peer?: string;
  type?: string;
}

/** Entries in log order (per agent), across month files, skipping an incomplete last line. */
export async function* readAudit(options: ReadAuditOptions = {}): AsyncGenerator<AuditRecord> {
  const filter = toFilter(options);
  if (options.agent !== undefined) {
    yield* readAgent(options.root, options.agent, filter, true);
    return;
  }
  const agents = await listAuditAgents(options.root);
  yield* mergeByTime(agents.map((agent) => readAgent(options.root, agent, filter, false)));
}

/**
 * Follows one agent's log live: yields each new entry once its line is complete, moving on to the
 * next month's file when the writer rolls over. Wakes on fs.watch events, and polls as a fallback
 * (watch can miss events, e.g. on network file systems, or before the directory exists).
 */
export async function* followAudit(options: FollowAuditOptions): AsyncGenerator<AuditRecord> {
  const dir = agentDir(options.root, options.agent);
  const filter = toFilter(options);
  const waker = new Waker(dir, options.pollIntervalMs ?? 1000, options.signal);
  try {
    let files = await listMonthFiles(dir);
    let afterSeq = options.afterSeq;
    let current: string | undefined;
    if (afterSeq === undefined) {
      afterSeq = (await readAuditHead(options))?.seq ?? 0;
      current = files.at(-1);
    } else {
      current = files[0];
    }
    let offset = 0;
    let lineNumber = 0;
    while (!options.signal?.aborted) {
      files = await listMonthFiles(dir);
      current ??= files[0];
      if (current !== undefined) {
        const path = join(dir, current);
        for (const line of await readCompleteLinesFrom(path, offset)) {
          offset += line.bytes;
          lineNumber++;
          const entry = parseEntry(line.text, `${path} line ${lineNumber}`);
          if (entry.seq > afterSeq && matches(entry, filter)) {
            yield { agent: options.agent, file: path, line: lineNumber, entry };
          }
        }
        // Listed before draining: if a newer file existed then, the writer had finished with this one.
        const newer = files.find((name) => name > current!);
        if (newer !== undefined) {
          current = newer;
          offset = 0;
          lineNumber = 0;
          continue;
        }
      }
      await waker.wait();
    }
  } finally {
    waker.close();
  }
}

/** The last entry's seq and hash, or null for an empty log; reads only the newest line. */
export async function readAuditHead(options: { root?: string; agent: string }): Promise<AuditHead | null> {
  const dir = agentDir(options.root, options.agent);
  const files = await listMonthFiles(dir);
  for (let i = files.length - 1; i >= 0; i--) {
    const path = join(dir, files[i]!);
    const text = await readLastCompleteLine(path);
    if (text !== undefined) {
      const entry = parseEntry(text, `${path} (last line)`);
      return { seq: entry.seq, hash: entry.hash };
    }
  }
  return null;
}

async function* readAgent(
  root: string | undefined,
  agent: string,
  filter: Filter,
  mustExist: boolean,
): AsyncGenerator<AuditRecord> {
  const dir = agentDir(root, agent);
  const files = await listMonthFiles(dir);
  if (mustExist && files.length === 0) {
    throw new AuditLogError(`no audit log for agent ${agent} under ${resolveAuditRoot(root)}`);
  }
  // An entry is never filed under an earlier month than its timestamp, so older files can be skipped.
  const firstMonth = filter.since !== undefined ? monthOf(new Date(filter.since)) : "";
  for (const name of files) {
    if (name.slice(0, 7) < firstMonth) continue;
    const path = join(dir, name);
    for await (const line of readLines(path)) {
      if (!line.complete) break;
      const entry = parseEntry(line.text, `${path} line ${line.number}`);
      if (matches(entry, filter)) yield { agent, file: path, line: line.number, entry };
    }
  }
}

async function* mergeByTime(sources: AsyncGenerator<AuditRecord>[]): AsyncGenerator<AuditRecord> {
  try {
    const heads = await Promise.all(sources.map((source) => source.next()));
    for (;;) {
      let pick = -1;
      for (let i = 0; i < heads.length; i++) {
        const head = heads[i]!;
        if (head.done) continue;
        const best = pick === -1 ? undefined : heads[pick];
        if (
          best === undefined ||
          best.done ||
          Date.parse(head.value.entry.ts) < Date.parse(best.value.entry.ts)
        )
          pick = i;
      }
      if (pick === -1) return;
      const chosen = heads[pick]!;
      if (chosen.done) return;
      yield chosen.value;
      heads[pick] = await sources[pick]!.next();
    }
  } finally {
    await Promise.all(sources.map((source) => source.return(undefined)));
  }
}

function parseEntry(text: string, where: string): AuditEntry {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new AuditLogError(`${where}: not JSON; run \`acp audit verify\``);
  }
  const parsed = AuditEntrySchema.safeParse(raw);
  if (!parsed.success) {
    throw new AuditLogError(`${where}: not an audit entry (${describeIssues(parsed.error)})`);
  }
  return parsed.data;
}

function toFilter(options: AuditFilter): Filter {
  return {
    since: toTime(options.since, "since"),
    until: toTime(options.until, "until"),
    peer: options.peer,
    type: options.type,
  };
}

function toTime(value: Date | string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const time = value instanceof Date ? value.getTime() : Date.parse(value);
  if (Number.isNaN(time)) throw new AuditLogError(`${name}: not a valid date: ${String(value)}`);
  return time;
}

function matches(entry: AuditEntry, filter: Filter): boolean {
  const ts = Date.parse(entry.ts);
  if (filter.since !== undefined && ts < filter.since) return false;
  if (filter.until !== undefined && ts > filter.until) return false;
  if (filter.type !== undefined && entry.type !== filter.type) return false;
  if (filter.peer !== undefined) {
    const peer = peerOf(entry);
    if (peer.agent !== filter.peer && peer.principal !== filter.peer) return false;
  }
  return true;
}

/** Complete lines from `offset` on; an incomplete last line is left for the next read. */
async function readCompleteLinesFrom(
  path: string,
  offset: number,
): Promise<{ text: string; bytes: number }[]> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    if (size < offset)
      throw new AuditLogError(`${path} shrank while being followed (was ${offset} bytes, now ${size})`);
    if (size === offset) return [];
    const buf = Buffer.alloc(size - offset);
    await fh.read(buf, 0, buf.length, offset);
    const lines: { text: string; bytes: number }[] = [];
    let start = 0;
    for (let nl = buf.indexOf(10); nl !== -1; nl = buf.indexOf(10, start)) {
      lines.push({ text: buf.subarray(start, nl).toString("utf8"), bytes: nl + 1 - start });
      start = nl + 1;
    }
    return lines;
  } finally {
    await fh.close();
  }
}

/** Resolves `wait()` on a file-system event in the directory, after the poll interval, or on abort. */
class Waker {
  private watcher: FSWatcher | undefined;
  private wake: (() => void) | undefined;
  private changed = false;

  constructor(
    private readonly dir: string,
    private readonly pollMs: number,
    private readonly signal: AbortSignal | undefined,
  ) {}

  wait(): Promise<void> {
    this.ensureWatcher();
    if (this.changed || this.signal?.aborted) {
      this.changed = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.signal?.removeEventListener("abort", done);
        this.wake = undefined;
        this.changed = false;
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      this.signal?.addEventListener("abort", done, { once: true });
      this.wake = done;
    });
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }

  private ensureWatcher(): void {
    if (this.watcher !== undefined) return;
    try {
      this.watcher = watch(this.dir, () => {
        this.changed = true;
        this.wake?.();
      });
      this.watcher.on("error", () => this.close());
    } catch {
      // The directory does not exist yet: polling covers it until it does.
    }
  }
}
