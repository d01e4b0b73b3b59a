import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { describeNarrowed, ensurePrivateDir, ensurePrivateFile } from "../../jsonl/private-files.js";
import { BrokerError } from "../errors.js";
import type { Warn } from "../policy.js";
import type { SqliteDatabase } from "./sqlite.js";

export const DEFAULT_DATA_DIR = ".acp";
export const DATABASE_FILE = "acp.db";

/**
 * `seq` orders everything (inbox order, list cursors, retention sweeps: `queued_at` never decreases
 * with `seq`). AUTOINCREMENT so a sequence number is never reused after old rows are purged.
 * Envelopes live in their own table: status updates then rewrite small pages, which halves the
 * write-ahead log traffic per message. A message is unique by sender and id: every sender has its
 * own id namespace (MessageRef). The partial indexes hold only messages still waiting for an ack
 * (opening an inbox stays cheap however much acknowledged history an agent has) and those out for
 * delivery (the sweep's dead letters).
 */
const MESSAGES_TABLE = (name: string) => `
CREATE TABLE IF NOT EXISTS ${name} (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL,
  sender TEXT NOT NULL,
  recipient TEXT NOT NULL,
  kind TEXT NOT NULL,
  method TEXT NOT NULL,
  submitted_at TEXT NOT NULL,
  queued_at INTEGER NOT NULL,
  status TEXT NOT NULL,
  delivered_at INTEGER,
  acknowledged_at INTEGER,
  failed_at INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  last_error TEXT,
  dead_letter_reason TEXT,
  dead_letter_detail TEXT,
  bytes INTEGER NOT NULL DEFAULT 0,
  priority INTEGER NOT NULL DEFAULT 1,
  UNIQUE (sender, id)
);`;
/**
 * Created after the migrations (they need `bytes`), on any database at open: by recipient and by
 * sender (with `seq`, for `list`'s walks; the sender's holds the envelope's size, summed for the
 * quotas), by recipient and id (`sendersTo`: a message named by its id alone, without walking the
 * recipient's history), the messages still waiting for an ack (by recipient, with the size) and those
 * out for delivery.
 */
const MESSAGE_INDEXES = `
CREATE INDEX IF NOT EXISTS messages_by_recipient ON messages(recipient, seq);
CREATE INDEX IF NOT EXISTS messages_sent ON messages(sender, seq, bytes);
CREATE INDEX IF NOT EXISTS messages_to ON messages(recipient, id);
CREATE INDEX IF NOT EXISTS messages_waiting ON messages(recipient, seq, bytes)
  WHERE status IN ('queued', 'delivered');
CREATE INDEX IF NOT EXISTS messages_out ON messages(next_attempt_at)
  WHERE status IN ('queued', 'delivered') AND next_attempt_at IS NOT NULL;`;
const SCHEMA = `${MESSAGES_TABLE("messages")}
CREATE TABLE IF NOT EXISTS message_bodies (seq INTEGER PRIMARY KEY, envelope TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kv (
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT,
  revision INTEGER NOT NULL,
  PRIMARY KEY (bucket, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', 5), ('expired_through_seq', 0);
`;

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED";
}

/**
 * Opens (creating if needed) `<dataDir>/acp.db`. The connection holds an exclusive lock for its whole
 * life: the embedded broker keeps delivery state in memory, so a second process on the same file
 * would break its guarantees; it gets a clear `unavailable` error instead.
 *
 * The directory is 0700 and the database 0600 whatever the umask (SQLite gives its write-ahead log
 * the database file's mode): every stored envelope is in there. Modes an earlier version left more
 * open are narrowed, with a warning.
 */
export function openDatabase(
  dataDir: string,
  synchronous: "normal" | "full",
  warn: Warn = (message) => process.emitWarning(message),
): SqliteDatabase {
  const dir = resolve(dataDir);
  const file = join(dir, DATABASE_FILE);
  try {
    const narrowed = ensurePrivateDir(dir);
    if (narrowed) warn(describeNarrowed(narrowed));
  } catch (error) {
    throw new BrokerError("unavailable", `cannot create data directory ${dir}: ${String(error)}`, {
      cause: error,
    });
  }
  try {
    for (const [path, create] of [
      [file, true],
      [`${file}-wal`, false],
      [`${file}-shm`, false],
    ] as const) {
      const narrowed = ensurePrivateFile(path, create);
      if (narrowed) warn(describeNarrowed(narrowed));
    }
  } catch (error) {
    throw new BrokerError("unavailable", `cannot open ${file}: ${String(error)}`, { cause: error });
  }
  let db: SqliteDatabase;
  try {
    db = new Database(file, { timeout: 250 });
  } catch (error) {
    throw new BrokerError("unavailable", `cannot open ${file}: ${String(error)}`, { cause: error });
  }
  try {
    // Exclusive locking must be set before WAL is entered, and WAL then needs no shared memory file.
    db.pragma("locking_mode = EXCLUSIVE");
    db.pragma("journal_mode = WAL");
    // NORMAL in WAL: a commit is in the OS before it returns, so it survives a crash of this process.
    db.pragma(`synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`);
    db.exec("BEGIN IMMEDIATE");
    db.exec(SCHEMA);
    addEnvelopeSizes(db);
    addPriorities(db);
    namespaceIdsPerSender(db);
    addSweepIndexes(db);
    db.exec("COMMIT");
  } catch (error) {
    db.close();
    if (isBusy(error)) {
      throw new BrokerError(
        "unavailable",
        `${file} is in use by another process (one broker per data directory)`,
        {
          cause: error,
        },
      );
    }
    throw new BrokerError("unavailable", `cannot initialise ${file}: ${String(error)}`, { cause: error });
  }
  return db;
}

/**
 * Schema 2 records each envelope's UTF-8 size in `messages.bytes` (what the quotas count). A
 * database made before it gets the column, filled for the envelopes still stored, once.
 */
function addEnvelopeSizes(db: SqliteDatabase): void {
  const columns = db.prepare("PRAGMA table_info(messages)").all() as { name: string }[];
  if (columns.some((column) => column.name === "bytes")) return;
  db.exec("ALTER TABLE messages ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0");
  db.exec(
    `UPDATE messages SET bytes = (SELECT length(CAST(b.envelope AS BLOB)) FROM message_bodies b WHERE b.seq = messages.seq)
     WHERE seq IN (SELECT seq FROM message_bodies)`,
  );
  db.exec("UPDATE meta SET value = 2 WHERE name = 'schema_version'");
}

/** Schema 3 ranks each message in its recipient's queue (`priority`, 0 low to 3 critical; 1 medium). */
function addPriorities(db: SqliteDatabase): void {
  const columns = db.prepare("PRAGMA table_info(messages)").all() as { name: string }[];
  if (columns.some((column) => column.name === "priority")) return;
  db.exec("ALTER TABLE messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 1");
  db.exec("UPDATE meta SET value = 3 WHERE name = 'schema_version'");
}

/**
 * Schema 4 makes a message unique by sender and id instead of by id: a database made before has its
 * `messages` table rebuilt once, rows, sequence numbers and the AUTOINCREMENT high mark kept (a
 * sequence number is never reused: cursors and `message_bodies` rest on it).
 */
function namespaceIdsPerSender(db: SqliteDatabase): void {
  const version = db.prepare("SELECT value FROM meta WHERE name = 'schema_version'").get() as {
    value: number;
  };
  if (version.value >= 4) return;
  const high = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").get() as
    | { seq: number }
    | undefined;
  const columns = (db.prepare("PRAGMA table_info(messages)").all() as { name: string }[])
    .map((column) => column.name)
    .join(", ");
  db.exec(MESSAGES_TABLE("messages_by_sender_id"));
  db.exec(`INSERT INTO messages_by_sender_id (${columns}) SELECT ${columns} FROM messages`);
  db.exec("DROP TABLE messages");
  db.exec("ALTER TABLE messages_by_sender_id RENAME TO messages");
  db.exec(MESSAGE_INDEXES);
  if (high) {
    db.prepare("DELETE FROM sqlite_sequence WHERE name = 'messages'").run();
    db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('messages', ?)").run(high.seq);
  }
  db.exec("UPDATE meta SET value = 4 WHERE name = 'schema_version'");
}

/**
 * Schema 5: the quota usage is read from indexes alone, holding each envelope's size: each
 * recipient's waiting messages (`messages_waiting`, read at open) and each sender's stored ones
 * (`messages_sent`, summed when the sender first needs it), instead of reading every row at open;
 * and messages out for delivery have an index of their own (`messages_out`: the sweep finds last
 * deliveries that went unanswered without walking every waiting message). A database made before
 * it gets them, built once at open, and loses the indexes they replace.
 */
function addSweepIndexes(db: SqliteDatabase): void {
  db.exec(MESSAGE_INDEXES);
  db.exec(`
    DROP INDEX IF EXISTS messages_unsettled;
    DROP INDEX IF EXISTS messages_by_sender;
    UPDATE meta SET value = 5 WHERE name = 'schema_version' AND value < 5;
  `);
}

/** What the SQLite result codes a failed write can end with mean, for `health()`. */
const WRITE_FAILURES: Array<[prefix: string, meaning: string]> = [
  ["SQLITE_FULL", "disk full"],
  ["SQLITE_IOERR", "disk I/O error"],
  ["SQLITE_READONLY", "database is read-only"],
  ["SQLITE_CORRUPT", "database file is corrupt"],
  ["SQLITE_NOTADB", "database file is corrupt"],
  ["SQLITE_CANTOPEN", "cannot open a database file"],
  ["SQLITE_PERM", "permission denied"],
];

/**
 * `write failed: disk full (SQLITE_FULL)`. A full disk is SQLITE_FULL; a file size limit
 * (RLIMIT_FSIZE, EFBIG) or a failing device is SQLITE_IOERR_WRITE: SQLite does not say which.
 */
export function describeWriteFailure(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.startsWith("SQLITE_")) {
    const meaning =
      WRITE_FAILURES.find(([prefix]) => code.startsWith(prefix))?.[1] ?? (error as Error).message;
    return `write failed: ${meaning} (${code})`;
  }
  return `write failed: ${error instanceof Error ? error.message : String(error)}`;
}

/** SQLite failures while writing (disk full, read-only, I/O) surface as `unavailable`: nothing was accepted. */
export function storageError(error: unknown): BrokerError {
  if (error instanceof BrokerError) return error;
  return new BrokerError("unavailable", `message store write failed: ${String(error)}`, { cause: error });
}
