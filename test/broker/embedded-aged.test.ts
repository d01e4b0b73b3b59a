/**
 * The embedded broker on a grown store: the indexes the quotas and the sweep read (and a database
 * made before them getting them), the retention sweep working off a backlog in one go, and the
 * quota usage read per sender after a restart.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { RetentionSweep } from "../../src/broker/embedded/retention.js";
import { DATABASE_FILE, type EmbeddedBroker, openBroker } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { eventually, message, reader } from "./support.js";

const tmp = useTmpDir("acp-broker-aged-");

function indexes(data: string): string[] {
  const db = new Database(join(data, DATABASE_FILE), { readonly: true });
  try {
    return (
      db
        .prepare(
          "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL",
        )
        .all() as {
        name: string;
      }[]
    )
      .map((row) => row.name)
      .sort();
  } finally {
    db.close();
  }
}

describe("embedded broker: a database made before its sweep indexes", () => {
  it("gets the indexes the quotas and the sweep read, loses the ones they replace, and keeps working", async () => {
    const data = tmp();
    const before = await openBroker({ data });
    const waiting = message("alice", "bob");
    await before.submit(waiting);
    await before.submit(message("alice", "carol"));
    await before.close();
    // The schema as it was: the unsettled index without sizes, the sender index without sizes.
    const db = new Database(join(data, DATABASE_FILE));
    db.exec(`
      DROP INDEX messages_waiting; DROP INDEX messages_out; DROP INDEX messages_sent;
      CREATE INDEX messages_unsettled ON messages(recipient, seq) WHERE status IN ('queued', 'delivered');
      CREATE INDEX messages_by_sender ON messages(sender, seq);
      UPDATE meta SET value = 4 WHERE name = 'schema_version';`);
    db.close();

    const broker = await openBroker({ data, quotas: { recipientPendingMessages: 10 } });
    try {
      expect((await broker.usage("bob")).pendingMessages).toBe(1);
      expect((await broker.list({ participant: "alice", from: "alice" })).items).toHaveLength(2);
      expect((await reader(await broker.openInbox("bob")).next()).id).toBe(waiting.id);
    } finally {
      await broker.close();
    }
    expect(indexes(data)).toEqual([
      "messages_by_recipient",
      "messages_out",
      "messages_sent",
      "messages_waiting",
    ]);
    const after = new Database(join(data, DATABASE_FILE), { readonly: true });
    expect(after.prepare("SELECT value FROM meta WHERE name = 'schema_version'").get()).toEqual({ value: 5 });
    after.close();
  });
});

describe("embedded broker: the retention sweep", () => {
  it("works off a backlog of several batches in one sweep, each batch its own commit", async () => {
    const broker = (await openBroker({ data: tmp() })) as EmbeddedBroker;
    try {
      const sent = [];
      for (let i = 0; i < 1_234; i++) sent.push(broker.submit(message("alice", "bob")));
      await Promise.all(sent);
      await new Promise((resolve) => setTimeout(resolve, 5));
      const batches: number[] = [];
      const settled: string[] = [];
      const sweep = new RetentionSweep(
        broker.table,
        broker.commits,
        { ...broker.policy, retentionMs: 1 },
        {
          dropped: (rows) => batches.push(rows.length),
          settled: (row) => settled.push(row.id),
          inboxOpen: () => false,
        },
        (warning) => expect.fail(warning),
      );
      await sweep.sweep();
      await sweep.stop();
      // Three batches of at most 500, one after the other: every envelope dropped, every message expired.
      expect(batches).toEqual([500, 500, 234]);
      expect(settled).toHaveLength(1_234);
      const last = await broker.get((await broker.list({ participant: "bob", limit: 1 })).items[0]!);
      expect(last?.envelope).toBeNull();
      expect(broker.table.expiredThroughSeq()).toBe(1_234);
    } finally {
      await broker.close();
    }
  });
});

describe("embedded broker: a sender's stored bytes after a restart", () => {
  const bytesOf = (input: { envelope: string }) => Buffer.byteLength(input.envelope);

  it("are read from the sender index when first needed, and exact", async () => {
    const data = tmp();
    const quotas = { senderStoredBytes: 1_000_000 };
    const first = await openBroker({ data, quotas });
    const sent = [message("alice", "bob"), message("alice", "carol"), message("dave", "bob")];
    for (const input of sent) await first.submit(input);
    await first.ack("bob", { from: "alice", id: sent[0]!.id });
    await first.close();

    const again = await openBroker({ data, quotas: { senderStoredBytes: bytesOf(sent[0]!) * 3 } });
    try {
      expect((await again.usage("alice")).storedBytes).toBe(bytesOf(sent[0]!) + bytesOf(sent[1]!));
      expect((await again.usage("dave")).storedBytes).toBe(bytesOf(sent[2]!));
      // Alice's first submission after the restart is checked against what she had stored.
      const third = message("alice", "bob", { envelope: sent[0]!.envelope.replace(/"n":\d+/, '"n":0') });
      await again.submit(third);
      expect((await again.usage("alice")).storedBytes).toBe(
        bytesOf(sent[0]!) + bytesOf(sent[1]!) + bytesOf(third),
      );
    } finally {
      await again.close();
    }
  });

  it("count nothing the sweep dropped, whether it dropped it before or after they were read", async () => {
    const data = tmp();
    const quotas = { senderStoredBytes: 1_000_000 };
    const first = await openBroker({ data, quotas });
    await first.submit(message("alice", "bob"));
    await first.submit(message("erin", "bob"));
    await first.close();
    await new Promise((resolve) => setTimeout(resolve, 300));

    // Reopened with a retention both messages are past: the first sweep drops them within a second.
    const again = await openBroker({ data, quotas, retentionMs: 200 });
    try {
      expect((await again.usage("erin")).storedBytes).toBeGreaterThan(0); // read before the sweep
      await eventually(async () => expect((again as EmbeddedBroker).table.expiredThroughSeq()).toBe(2));
      expect((await again.usage("erin")).storedBytes).toBe(0);
      expect((await again.usage("alice")).storedBytes).toBe(0); // read after the sweep
    } finally {
      await again.close();
    }
  });
});
