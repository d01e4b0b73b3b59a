import type { AuditEntry } from "../../audit/index.js";
import type { SqliteDatabase, SqliteStatement } from "../../broker/embedded/sqlite.js";

/** The dashboard feed index's tables, its statements, and what one relay audit line adds to it. */

export const FEED_TYPES = ["request", "response", "notification", "handoff"] as const;
export type FeedType = (typeof FEED_TYPES)[number];
const TYPE_CODE = new Map<string, number>(FEED_TYPES.map((type, code) => [type, code]));

/** Rollup slots: the whole gateway's counts per 5 minutes, one agent's or principal's per hour. */
export const GATEWAY_SLOT_MS = 5 * 60_000;
export const PARTY_SLOT_MS = 3_600_000;
/** The rollup scope of the whole gateway; agents and principals use their name's id. */
export const GATEWAY_SCOPE = 0;

/** An indexed entry: enough to count it, order it and read it. */
export interface IndexedEntry {
  rowid: number;
  /** The message id (its `messageId`, else its JSON-RPC id). */
  id: string;
  at: number;
  type: number;
  log: number;
  offset: number;
  length: number;
  line: number;
}

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS logs (
  id INTEGER PRIMARY KEY, agent TEXT NOT NULL, month TEXT NOT NULL,
  bytes INTEGER NOT NULL, lines INTEGER NOT NULL, UNIQUE (agent, month));
CREATE TABLE IF NOT EXISTS names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS entries (
  at INTEGER NOT NULL, type INTEGER NOT NULL, sender INTEGER NOT NULL, recipient INTEGER NOT NULL,
  sender_principal INTEGER, recipient_principal INTEGER, message_id TEXT NOT NULL,
  log INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL, line INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS entries_by_type ON entries (type, at);
CREATE INDEX IF NOT EXISTS entries_by_message ON entries (message_id);
CREATE INDEX IF NOT EXISTS entries_by_log ON entries (log);
CREATE TABLE IF NOT EXISTS volume (
  scope INTEGER NOT NULL, slot INTEGER NOT NULL, type INTEGER NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (scope, slot, type)) WITHOUT ROWID;
`;

/**
 * The sender and recipient walks' indexes: the party and the time, then the type and the other
 * party, so that a walk filters and counts without reading a row. A file made before them (its
 * `user_version` 0) has the walks on `(party, at)` alone until they are built (feed-index-upgrade.ts).
 */
export const PARTY_INDEXES = `
CREATE INDEX IF NOT EXISTS entries_sent ON entries (sender, at, type, recipient);
CREATE INDEX IF NOT EXISTS entries_received ON entries (recipient, at, type, sender);
`;
export const EARLIER_PARTY_INDEXES = `
DROP INDEX IF EXISTS entries_by_sender;
DROP INDEX IF EXISTS entries_by_recipient;
`;
/** The index file's `user_version` once it has PARTY_INDEXES. */
export const PARTY_INDEXES_VERSION = 1;

/** Which index each walk takes. */
export interface WalkIndexes {
  type: string;
  sender: string;
  recipient: string;
}
export const WALK_INDEXES: WalkIndexes = {
  type: "entries_by_type",
  sender: "entries_sent",
  recipient: "entries_received",
};
export const EARLIER_WALK_INDEXES: WalkIndexes = {
  type: "entries_by_type",
  sender: "entries_by_sender",
  recipient: "entries_by_recipient",
};

/**
 * Makes the tables a file lacks (a new file with the walks' present indexes); true when the file
 * has those indexes, false for one made before them.
 */
export function applySchema(db: SqliteDatabase): boolean {
  const made = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'entries'").get() !== undefined;
  db.exec(SCHEMA);
  if (!made) db.exec(`${PARTY_INDEXES}\nPRAGMA user_version = ${PARTY_INDEXES_VERSION};`);
  const { user_version: version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
  if (version < PARTY_INDEXES_VERSION) return false;
  // An upgrade stopped between its two transactions left the earlier indexes.
  db.exec(EARLIER_PARTY_INDEXES);
  return true;
}

export function prepare(db: SqliteDatabase) {
  return {
    insert: db.prepare(
      `INSERT INTO entries (at, type, sender, recipient, sender_principal, recipient_principal, message_id, log, offset, length, line)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    saveLog: db.prepare("UPDATE logs SET bytes = ?, lines = ? WHERE id = ?"),
    addLog: db.prepare("INSERT INTO logs (agent, month, bytes, lines) VALUES (?, ?, 0, 0)"),
    addName: db.prepare("INSERT INTO names (name) VALUES (?)"),
    addCount: db.prepare(
      `INSERT INTO volume (scope, slot, type, count) VALUES (?, ?, ?, ?)
       ON CONFLICT (scope, slot, type) DO UPDATE SET count = count + excluded.count`,
    ),
    rowsOfLog: db.prepare(
      "SELECT at, type, sender, recipient, sender_principal, recipient_principal FROM entries WHERE log = ?",
    ) as SqliteStatement<
      [number],
      {
        at: number;
        type: number;
        sender: number;
        recipient: number;
        sender_principal: number | null;
        recipient_principal: number | null;
      }
    >,
    deleteLog: db.prepare("DELETE FROM entries WHERE log = ?"),
  };
}

/** Adds `delta` to the gateway's 5-minute slot and to each distinct agent's and principal's hour. */
export function countInto(
  counts: Map<string, number>,
  at: number,
  type: number,
  agents: [number, number],
  principals: [number | null, number | null],
  delta: number,
): void {
  const add = (scope: number, slotMs: number) => {
    const key = `${scope}:${Math.floor(at / slotMs)}:${type}`;
    counts.set(key, (counts.get(key) ?? 0) + delta);
  };
  add(GATEWAY_SCOPE, GATEWAY_SLOT_MS);
  add(agents[0], PARTY_SLOT_MS);
  if (agents[1] !== agents[0]) add(agents[1], PARTY_SLOT_MS);
  if (principals[0] !== null) add(principals[0], PARTY_SLOT_MS);
  if (principals[1] !== null && principals[1] !== principals[0]) add(principals[1], PARTY_SLOT_MS);
}

export interface EntryFields {
  at: number;
  type: number;
  from: string;
  to: string;
  fromPrincipal: string | null;
  toPrincipal: string | null;
  id: string;
}

/** What the index keeps of one log line; undefined for a line that is not a relayed message's entry. */
export function entryFields(text: string): EntryFields | undefined {
  let entry: Partial<AuditEntry>;
  try {
    entry = JSON.parse(text) as Partial<AuditEntry>;
  } catch {
    return undefined;
  }
  const type = TYPE_CODE.get(entry.type as string);
  const at = typeof entry.ts === "string" ? Date.parse(entry.ts) : Number.NaN;
  const id = messageIdOf(entry);
  const { from, to } = entry;
  if (
    type === undefined ||
    Number.isNaN(at) ||
    id === undefined ||
    typeof from?.agent !== "string" ||
    typeof to?.agent !== "string"
  )
    return undefined;
  return {
    at,
    type,
    from: from.agent,
    to: to.agent,
    fromPrincipal: from.principal ?? null,
    toPrincipal: to.principal ?? null,
    id,
  };
}

/** The message an entry is about: its `messageId`, else its JSON-RPC id (as the feed names it). */
export function messageIdOf(entry: Partial<Pick<AuditEntry, "messageId" | "id">>): string | undefined {
  return entry.messageId ?? (entry.id === null || entry.id === undefined ? undefined : String(entry.id));
}
