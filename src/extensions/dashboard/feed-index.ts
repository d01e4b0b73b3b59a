import { closeSync, fstatSync, openSync, readdirSync, readSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { MONTH_FILE } from "../../audit/files.js";
import { AuditEntrySchema, type AuditRecord } from "../../audit/index.js";
import type { SqliteDatabase } from "../../broker/embedded/sqlite.js";
import { ensurePrivateFile } from "../../jsonl/private-files.js";
import {
  applySchema,
  countInto,
  EARLIER_WALK_INDEXES,
  entryFields,
  type IndexedEntry,
  messageIdOf,
  prepare,
  WALK_INDEXES,
  type WalkIndexes,
} from "./feed-index-schema.js";
import { buildPartyIndexes, type IndexLog, type PartyIndexBuild } from "./feed-index-upgrade.js";

/**
 * The dashboard's index of the relay audit log: for each relayed message, where its entry is (log,
 * byte offset, line), when, of what type and between whom; and how many messages there were per
 * 5 minutes (the whole gateway) and per hour (each agent, each principal). The feed, the volume
 * chart and a message's detail read this instead of the logs, so they cost about the same on a
 * gateway that has kept a week of traffic as on a new one.
 *
 * The logs stay the record; the index is derived from them (`<data>/relay-audit-index.db`, safe to
 * delete). It reads what each log gained since it last looked (it keeps each log's indexed length):
 * shortly after the relay accepts a message from that agent, before each query, and in a full scan
 * at start and every minute. A log that shrank, or whose line at an indexed offset is not the entry
 * indexed there, is indexed again from its start. Catching up (the whole history, the first time a
 * gateway runs with it) goes in slices of a few milliseconds, so it never holds the event loop. A
 * file made before the walks' present indexes gets them after start (feed-index-upgrade.ts).
 */

interface LogState {
  id: number;
  agent: string;
  month: string;
  /** Bytes and lines indexed so far (whole lines only). */
  bytes: number;
  lines: number;
}

/** How much one slice of catching up may read: a few milliseconds of work. */
const SLICE_BYTES = 256 * 1024;
/** A full scan of the logs (new agents, new months, anything a notice missed) this often. */
const SCAN_INTERVAL_MS = 60_000;
/**
 * After the relay accepts a message its sender's log is looked at every CHANGED_DELAY_MS (and
 * before each query) for CHANGED_WATCH_MS: the entry is appended a moment later, later still on a
 * busy machine, and the log of a new agent does not exist yet.
 */
const CHANGED_DELAY_MS = 100;
const CHANGED_WATCH_MS = 5_000;
const OPEN_FILES = 64;

export class FeedIndex {
  private readonly names = new Map<string, number>();
  private readonly logs = new Map<string, LogState>();
  private readonly logsById = new Map<number, LogState>();
  private readonly newest = new Map<string, LogState>();
  /** Agents whose logs are being watched (when their last notice came), and logs with more to read. */
  private readonly changedAgents = new Map<string, number>();
  private readonly behind = new Set<LogState>();
  private readonly files = new Map<string, number>();
  private readonly statements: ReturnType<typeof prepare>;
  private changedTimer: NodeJS.Timeout | undefined;
  private scanTimer: NodeJS.Timeout | undefined;
  private catchingUp: NodeJS.Immediate | undefined;
  private closed = false;
  /** The indexes the walks take: the earlier ones until a file made before the present ones has them. */
  walkIndexes: WalkIndexes;
  /** Building the present walk indexes (nothing is written here meanwhile). */
  private upgrading: PartyIndexBuild | undefined;

  private constructor(
    readonly db: SqliteDatabase,
    private readonly root: string,
    private readonly onError: (err: unknown) => void,
    private readonly log: IndexLog,
    hasPartyIndexes: boolean,
  ) {
    this.walkIndexes = hasPartyIndexes ? WALK_INDEXES : EARLIER_WALK_INDEXES;
    this.statements = prepare(db);
    for (const { id, name } of db.prepare("SELECT id, name FROM names").all() as {
      id: number;
      name: string;
    }[])
      this.names.set(name, id);
    for (const log of db.prepare("SELECT id, agent, month, bytes, lines FROM logs").all() as LogState[])
      this.remember(log);
  }

  /** Opens (creating) the index file; `start` begins following the logs (and builds missing indexes). */
  static async open(
    root: string,
    file: string,
    onError: (err: unknown) => void,
    log: IndexLog = () => undefined,
  ): Promise<FeedIndex> {
    ensurePrivateFile(file);
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(file) as unknown as SqliteDatabase;
    let hasPartyIndexes: boolean;
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
      hasPartyIndexes = applySchema(db);
    } catch (err) {
      db.close();
      throw err;
    }
    return new FeedIndex(db, root, onError, log, hasPartyIndexes);
  }

  /** Begins following the logs (after building the walks' present indexes, if the file lacks them). */
  start(): void {
    if (this.walkIndexes === WALK_INDEXES) {
      this.follow();
      return;
    }
    this.upgrading = buildPartyIndexes(this.db, this.log, () => {
      this.walkIndexes = WALK_INDEXES;
    });
    void this.upgrading.done
      // A build ended by close() is no failure: the next start builds again.
      .catch((err) => this.closed || this.onError(err))
      .finally(() => {
        this.upgrading = undefined;
        if (!this.closed) this.follow();
      });
  }

  private follow(): void {
    const scan = () => {
      this.scan().catch(this.onError);
      this.scanTimer = setTimeout(scan, SCAN_INTERVAL_MS);
      this.scanTimer.unref();
    };
    scan();
  }

  close(): void {
    this.closed = true;
    this.upgrading?.stop();
    clearTimeout(this.changedTimer);
    clearTimeout(this.scanTimer);
    if (this.catchingUp) clearImmediate(this.catchingUp);
    for (const fd of this.files.values()) closeSync(fd);
    this.files.clear();
    this.db.close();
  }

  /** The relay accepted a message from `agent`: its log is watched for the entry. */
  changed(agent: string): void {
    this.changedAgents.set(agent, performance.now());
    this.watchChanged();
  }

  private watchChanged(): void {
    if (this.closed || this.changedAgents.size === 0) return;
    this.changedTimer ??= setTimeout(() => {
      this.changedTimer = undefined;
      try {
        this.catchUpChanged();
      } catch (err) {
        this.onError(err);
      }
      this.watchChanged();
    }, CHANGED_DELAY_MS);
    this.changedTimer.unref();
  }

  /** Reads what the logs of agents with a recent notice gained, now (also before each query). */
  catchUpChanged(): void {
    if (this.closed || this.upgrading) return;
    const now = performance.now();
    for (const [agent, at] of this.changedAgents) {
      if (now - at > CHANGED_WATCH_MS) this.changedAgents.delete(agent);
      const newest = this.newestLog(agent);
      // A log whose history is still being indexed is left to the slices.
      if (!newest || (this.behind.has(newest) && newest.bytes === 0)) continue;
      while (this.readMore(newest)) {
        // what a few seconds of traffic wrote is small: read it all
      }
    }
  }

  /** The id of an agent's (`a:`) or principal's (`p:`) name, if it appears in the index. */
  nameId(name: string): number | undefined {
    return this.names.get(name);
  }

  /**
   * The entries of `rows`, read from their logs; undefined for one that is no longer what was
   * indexed (its log is then indexed again).
   */
  read(rows: readonly IndexedEntry[]): (AuditRecord | undefined)[] {
    return rows.map((row) => {
      const log = this.logsById.get(row.log);
      if (!log) return undefined;
      const path = this.pathOf(log);
      try {
        const buf = Buffer.alloc(row.length);
        readSync(this.fileOf(path), buf, 0, row.length, row.offset);
        const parsed = AuditEntrySchema.safeParse(JSON.parse(buf.toString("utf8")));
        if (parsed.success && Date.parse(parsed.data.ts) === row.at && messageIdOf(parsed.data) === row.id) {
          return { agent: log.agent, file: path, line: row.line, entry: parsed.data };
        }
      } catch {
        // unreadable: indexed again below (at a later read while the walks' indexes are built)
      }
      if (!this.upgrading) this.reindex(log);
      return undefined;
    });
  }

  /** Finds new agents and months and what each log gained; reads it in slices. */
  private async scan(): Promise<void> {
    let agents: string[];
    try {
      agents = (await readdir(this.root, { withFileTypes: true }))
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    for (const agent of agents) {
      let months: string[];
      try {
        months = (await readdir(join(this.root, agent))).filter((name) => MONTH_FILE.test(name)).sort();
      } catch {
        continue;
      }
      if (this.closed) return;
      for (const name of months) this.behind.add(this.logOf(agent, name.slice(0, 7)));
    }
    this.scheduleCatchUp();
  }

  private scheduleCatchUp(): void {
    if (this.catchingUp || this.closed) return;
    this.catchingUp = setImmediate(() => {
      this.catchingUp = undefined;
      try {
        const [log] = this.behind;
        if (log && this.readMore(log)) this.behind.add(log);
      } catch (err) {
        this.onError(err);
      }
      if (this.behind.size > 0) this.scheduleCatchUp();
    });
  }

  /** Indexes up to SLICE_BYTES more of `log`; true while it has more. */
  private readMore(log: LogState): boolean {
    this.behind.delete(log);
    if (this.closed) return false;
    const path = this.pathOf(log);
    let size: number;
    try {
      size = fstatSync(this.fileOf(path)).size;
    } catch {
      return false;
    }
    if (size < log.bytes) {
      this.reindex(log);
      return true;
    }
    if (size === log.bytes) return false;
    // A slice, or more when one line is longer than that.
    let buf: Buffer;
    let end: number;
    for (
      let length = Math.min(SLICE_BYTES, size - log.bytes);
      ;
      length = Math.min(length * 2, size - log.bytes)
    ) {
      buf = Buffer.alloc(length);
      const read = readSync(this.fileOf(path), buf, 0, length, log.bytes);
      end = buf.subarray(0, read).lastIndexOf(0x0a) + 1;
      if (end > 0 || length >= size - log.bytes) break;
    }
    if (end === 0) return false; // the last line is still being written
    this.db.transaction(() => this.indexLines(log, buf.subarray(0, end)))();
    if (log.bytes < size) this.behind.add(log);
    return log.bytes < size;
  }

  /** Indexes the whole lines in `text` (which starts at `log.bytes`) and moves the log on past them. */
  private indexLines(log: LogState, text: Buffer): void {
    const counts = new Map<string, number>();
    const { insert } = this.statements;
    let start = 0;
    for (let nl = text.indexOf(0x0a); nl !== -1; nl = text.indexOf(0x0a, start)) {
      const line = ++log.lines;
      const fields = entryFields(text.subarray(start, nl).toString("utf8"));
      if (fields) {
        const sender = this.id(`a:${fields.from}`);
        const recipient = this.id(`a:${fields.to}`);
        const senderPrincipal = fields.fromPrincipal === null ? null : this.id(`p:${fields.fromPrincipal}`);
        const recipientPrincipal = fields.toPrincipal === null ? null : this.id(`p:${fields.toPrincipal}`);
        insert.run(
          fields.at,
          fields.type,
          sender,
          recipient,
          senderPrincipal,
          recipientPrincipal,
          fields.id,
          log.id,
          log.bytes + start,
          nl - start,
          line,
        );
        countInto(
          counts,
          fields.at,
          fields.type,
          [sender, recipient],
          [senderPrincipal, recipientPrincipal],
          1,
        );
      }
      start = nl + 1;
    }
    log.bytes += text.length;
    this.statements.saveLog.run(log.bytes, log.lines, log.id);
    this.addCounts(counts);
  }

  /** Forgets what was indexed of `log` (its rows and their counts) and indexes it again from its start. */
  private reindex(log: LogState): void {
    this.db.transaction(() => {
      const counts = new Map<string, number>();
      for (const row of this.statements.rowsOfLog.all(log.id))
        countInto(
          counts,
          row.at,
          row.type,
          [row.sender, row.recipient],
          [row.sender_principal, row.recipient_principal],
          -1,
        );
      this.addCounts(counts);
      this.statements.deleteLog.run(log.id);
      log.bytes = 0;
      log.lines = 0;
      this.statements.saveLog.run(0, 0, log.id);
    })();
    const fd = this.files.get(this.pathOf(log));
    if (fd !== undefined) closeSync(fd);
    this.files.delete(this.pathOf(log));
    this.behind.add(log);
    this.scheduleCatchUp();
  }

  private addCounts(counts: Map<string, number>): void {
    for (const [key, count] of counts) {
      const [scope, slot, type] = key.split(":").map(Number) as [number, number, number];
      this.statements.addCount.run(scope, slot, type, count);
    }
  }

  private id(name: string): number {
    let id = this.names.get(name);
    if (id === undefined) {
      id = Number(this.statements.addName.run(name).lastInsertRowid);
      this.names.set(name, id);
    }
    return id;
  }

  private logOf(agent: string, month: string): LogState {
    const log = this.logs.get(`${agent}/${month}`);
    if (log) return log;
    const id = Number(this.statements.addLog.run(agent, month).lastInsertRowid);
    return this.remember({ id, agent, month, bytes: 0, lines: 0 });
  }

  private remember(log: LogState): LogState {
    this.logs.set(`${log.agent}/${log.month}`, log);
    this.logsById.set(log.id, log);
    const newest = this.newest.get(log.agent);
    if (!newest || log.month > newest.month) this.newest.set(log.agent, log);
    return log;
  }

  /**
   * The log an agent writes now: its newest known month, unless the month has turned since (or the
   * agent is new), when its directory is listed for the newest file.
   */
  private newestLog(agent: string): LogState | undefined {
    const known = this.newest.get(agent);
    if (known && known.month >= new Date().toISOString().slice(0, 7)) return known;
    let months: string[];
    try {
      months = readdirSync(join(this.root, agent)).filter((name) => MONTH_FILE.test(name));
    } catch {
      return known;
    }
    const latest = months.sort().at(-1);
    return latest ? this.logOf(agent, latest.slice(0, 7)) : known;
  }

  private pathOf(log: LogState): string {
    return join(this.root, log.agent, `${log.month}.jsonl`);
  }

  /** An open descriptor per recently read log (a few dozen at most). */
  private fileOf(path: string): number {
    let fd = this.files.get(path);
    if (fd === undefined) {
      fd = openSync(path, "r");
      if (this.files.size >= OPEN_FILES) {
        const [oldest, oldestFd] = this.files.entries().next().value as [string, number];
        this.files.delete(oldest);
        closeSync(oldestFd);
      }
      this.files.set(path, fd);
    }
    return fd;
  }
}
