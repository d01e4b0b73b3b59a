import { chmodSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { EmbeddedBroker } from "../../src/broker/embedded/broker.js";
import { DATABASE_FILE } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { message, reader } from "./support.js";

/** The `messages` table of schema 2: one id namespace for every sender. */
const SCHEMA_2 = `
CREATE TABLE messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, sender TEXT NOT NULL,
  recipient TEXT NOT NULL, kind TEXT NOT NULL, method TEXT NOT NULL, submitted_at TEXT NOT NULL,
  queued_at INTEGER NOT NULL, status TEXT NOT NULL, delivered_at INTEGER, acknowledged_at INTEGER,
  failed_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER, last_error TEXT,
  dead_letter_reason TEXT, dead_letter_detail TEXT, bytes INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE message_bodies (seq INTEGER PRIMARY KEY, envelope TEXT NOT NULL);
CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta (name, value) VALUES ('schema_version', 2), ('expired_through_seq', 0);
`;

describe("embedded broker schema", () => {
  const tmp = useTmpDir("acp-schema-");

  it("moves a database with one id namespace to one per sender, keeping rows and sequence numbers", async () => {
    const data = tmp();
    const kept = message("alice", "bob");
    const db = new Database(join(data, DATABASE_FILE));
    db.exec(SCHEMA_2);
    db.prepare(
      `INSERT INTO messages (seq, id, sender, recipient, kind, method, submitted_at, queued_at, status, bytes)
       VALUES (7, ?, 'alice', 'bob', 'notification', 'agent.notify', ?, ?, 'queued', ?)`,
    ).run(kept.id, kept.submittedAt, Date.now(), Buffer.byteLength(kept.envelope));
    db.prepare("INSERT INTO message_bodies (seq, envelope) VALUES (7, ?)").run(kept.envelope);
    // Rows up to 9 were used and purged: 8 and 9 must never be handed out again.
    db.prepare("UPDATE sqlite_sequence SET seq = 9 WHERE name = 'messages'").run();
    db.close();
    chmodSync(join(data, DATABASE_FILE), 0o600);

    const broker = EmbeddedBroker.open({ data });
    try {
      expect(await broker.get(kept)).toMatchObject({ status: "queued", envelope: kept.envelope });
      expect(await broker.submit(kept)).toMatchObject({ duplicate: true });
      const sameId = { ...message("mallory", "bob"), id: kept.id };
      expect(await broker.submit(sameId)).toMatchObject({ duplicate: false });
      const inbox = reader(await broker.openInbox("bob"));
      expect([(await inbox.next()).from, (await inbox.next()).from]).toEqual(["alice", "mallory"]);
    } finally {
      await broker.close();
    }
    const after = new Database(join(data, DATABASE_FILE), { readonly: true });
    try {
      const rows = after.prepare("SELECT seq, sender FROM messages ORDER BY seq").all() as {
        seq: number;
        sender: string;
      }[];
      expect(rows.map((r) => r.sender)).toEqual(["alice", "mallory"]);
      expect(rows[0]?.seq).toBe(7);
      expect(rows[1]?.seq).toBeGreaterThan(9);
      expect(after.prepare("SELECT value FROM meta WHERE name = 'schema_version'").get()).toEqual({
        value: 5,
      });
    } finally {
      after.close();
    }
  });
});
