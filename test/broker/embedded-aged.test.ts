/**
 * The embedded broker on a grown store: the indexes the quotas and the sweep read (and a database
 * made before them getting them), the retention sweep working off a backlog in one go, and the
 * quota usage read per sender after a restart.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it, vi } from "vitest";
import {
  inSteps,
  MAX_BATCH,
  MIN_BATCH,
  nextBatchSize,
  RetentionSweep,
  STEP_ROWS,
} from "../../src/broker/embedded/retention.js";
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
      "messages_to",
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
      const held: number[] = [];
      const sweep = new RetentionSweep(
        broker.table,
        broker.commits,
        { ...broker.policy, retentionMs: 1 },
        {
          dropped: (rows) => batches.push(rows.length),
          settled: (row) => settled.push(row.id),
          inboxOpen: () => false,
          batched: (heldMs) => held.push(heldMs),
        },
        (warning) => expect.fail(warning),
      );
      await sweep.sweep();
      await sweep.stop();
      // Each batch reports how long it held the event loop, the last one (nothing more due) too.
      expect(held.length).toBeGreaterThanOrEqual(batches.length);
      expect(held.every((ms) => ms >= 0)).toBe(true);
      // Several batches, one after the other, the first of at most 500 (fewer when the clock ends it
      // first) and each sized from the one before: every envelope dropped, every message expired.
      expect(batches.length).toBeGreaterThan(1);
      expect(batches[0]).toBeLessThanOrEqual(500);
      for (const [i, rows] of batches.entries())
        if (i > 0) expect(rows).toBeLessThanOrEqual(Math.max(MIN_BATCH, 2 * batches[i - 1]!));
      expect(batches.reduce((sum, rows) => sum + rows, 0)).toBe(1_234);
      expect(settled).toHaveLength(1_234);
      const last = await broker.get((await broker.list({ participant: "bob", limit: 1 })).items[0]!);
      expect(last?.envelope).toBeNull();
      expect(broker.table.expiredThroughSeq()).toBe(1_234);
    } finally {
      await broker.close();
    }
  });
});

describe("embedded broker: the retention sweep's batches bounded by the clock", () => {
  it("steps through at most the batch's rows, stopping at the step that passes the deadline or when nothing more is due", () => {
    let clock = 0;
    const now = vi.spyOn(performance, "now").mockImplementation(() => clock);
    try {
      const steps: number[] = [];
      const step = (rows: number) => {
        steps.push(rows);
        clock += 2;
        return true;
      };
      expect(inSteps(1_000, 5, step)).toBe(true);
      expect(steps).toEqual([STEP_ROWS, STEP_ROWS, STEP_ROWS]); // 6 ms passes the deadline at 5
      steps.length = 0;
      clock = 0;
      expect(inSteps(100, 1_000, step)).toBe(true);
      expect(steps).toEqual([STEP_ROWS, 100 - STEP_ROWS]); // the rows used up
      steps.length = 0;
      expect(inSteps(1_000, 0, step)).toBe(true);
      expect(steps).toEqual([STEP_ROWS]); // past the deadline already: one step, so every batch progresses
      expect(inSteps(1_000, 1_000, () => false)).toBe(false);
    } finally {
      now.mockRestore();
    }
  });

  it("cut short by the clock, drops exactly the envelopes past retention and purges exactly the records past theirs, losing nothing newer", async () => {
    const broker = (await openBroker({ data: tmp() })) as EmbeddedBroker;
    try {
      const old = Array.from({ length: 300 }, (_, i) => message("alice", i % 2 ? "bob" : "carol"));
      for (const input of old) await broker.submit(input);
      const acked = old.filter((_, i) => i % 3 === 0);
      for (const input of acked) await broker.ack(input.to, { from: "alice", id: input.id });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const cutoff = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 20));
      const fresh = Array.from({ length: 40 }, () => message("dave", "bob"));
      for (const input of fresh) await broker.submit(input);
      // The sweeps' "now" stands still, so their cutoff falls between the old and the fresh messages
      // however long they take; and every reading of the event loop's clock is 3 ms later, so each
      // batch stops after its second step.
      const frozen = Date.now();
      const retentionMs = frozen - cutoff;
      vi.spyOn(Date, "now").mockReturnValue(frozen);
      let clock = performance.now();
      vi.spyOn(performance, "now").mockImplementation(() => (clock += 3));
      const sweepWith = async (policy: Partial<typeof broker.policy>) => {
        const batches: number[] = [];
        const settled: string[] = [];
        const sweep = new RetentionSweep(
          broker.table,
          broker.commits,
          { ...broker.policy, ...policy },
          {
            dropped: (rows) => batches.push(rows.length),
            settled: (row) => settled.push(row.id),
            inboxOpen: () => true,
          },
          (warning) => expect.fail(warning),
        );
        await sweep.sweep();
        await sweep.stop();
        return { batches, settled };
      };
      const swept = await sweepWith({ retentionMs });
      // The first batch's 500 rows cut by the clock after two steps, and none longer after it.
      const batches = swept.batches.filter((rows) => rows > 0);
      expect(batches[0]).toBe(2 * STEP_ROWS);
      expect(Math.max(...batches)).toBe(2 * STEP_ROWS);
      expect(batches.reduce((sum, rows) => sum + rows, 0)).toBe(300);
      expect(swept.settled.sort()).toEqual(
        old
          .filter((_, i) => i % 3 !== 0)
          .map((s) => s.id)
          .sort(),
      );
      const record = async (from: string, id: string) => broker.get({ from, id });
      for (const stored of old) {
        const kept = await record("alice", stored.id);
        expect(kept?.envelope).toBeNull();
        expect(kept?.status).toBe(acked.includes(stored) ? "acknowledged" : "expired");
      }
      for (const stored of fresh) {
        const kept = await record("dave", stored.id);
        expect(kept?.status).toBe("queued");
        expect(kept?.envelope).not.toBeNull();
      }
      // The records too, with the same bound: the old ones go, the fresh ones stay, still waiting.
      await sweepWith({ retentionMs, recordRetentionMs: retentionMs });
      vi.restoreAllMocks();
      for (const stored of old) expect(await record("alice", stored.id)).toBeNull();
      expect((await broker.list({ participant: "bob", limit: 100 })).items).toHaveLength(40);
      const inbox = reader(await broker.openInbox("bob"));
      expect((await inbox.next()).id).toBe(fresh[0]!.id);
    } finally {
      vi.restoreAllMocks();
      await broker.close();
    }
  });
});

describe("embedded broker: the retention sweep's batch size", () => {
  it("shrinks a batch that held the loop too long and grows a quick one, at most doubling, within bounds", () => {
    expect(nextBatchSize(500, 50)).toBe(50); // 10 times the 5 ms aimed at: a tenth of the rows
    expect(nextBatchSize(500, 5)).toBe(500);
    expect(nextBatchSize(500, 1)).toBe(1_000); // could take 2,500, grows by at most double
    expect(nextBatchSize(500, 10_000)).toBe(MIN_BATCH);
    expect(nextBatchSize(MAX_BATCH, 0)).toBe(MAX_BATCH);
  });

  it("drops the same rows with batches of any size: the rows up to the cutoff, in order, nothing after", async () => {
    const broker = (await openBroker({ data: tmp() })) as EmbeddedBroker;
    try {
      for (let i = 0; i < 40; i++) await broker.submit(message("alice", "bob"));
      await new Promise((resolve) => setTimeout(resolve, 5));
      const cutoff = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 5));
      for (let i = 0; i < 5; i++) await broker.submit(message("alice", "bob"));
      const sizes = [MIN_BATCH, 7, 1, 3];
      const dropped: number[] = [];
      for (let i = 0; ; i++) {
        const limit = sizes[i % 4]!;
        const result = await broker.commits.run(() => broker.table.expireThrough(cutoff, limit));
        expect(result.dropped.length).toBeLessThanOrEqual(limit);
        dropped.push(...result.dropped.map((row) => row.seq));
        if (!result.more) break;
      }
      expect(dropped).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      expect(broker.table.expiredThroughSeq()).toBe(40);
      const newest = await broker.list({ participant: "bob", limit: 100 });
      expect(newest.items).toHaveLength(45);
    } finally {
      await broker.close();
    }
  });
});

describe("embedded broker: the record purge", () => {
  it("deletes the records up to the cutoff, oldest first, in batches, and nothing when none is due", async () => {
    const broker = (await openBroker({ data: tmp() })) as EmbeddedBroker;
    try {
      for (let i = 0; i < 30; i++) await broker.submit(message("alice", "bob"));
      await new Promise((resolve) => setTimeout(resolve, 5));
      const cutoff = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 5));
      for (let i = 0; i < 5; i++) await broker.submit(message("alice", "bob"));
      const stored = async () => (await broker.list({ participant: "bob", limit: 100 })).items.length;

      const purge = (at: number, limit: number) =>
        broker.commits.run(() => broker.table.purgeThrough(at, limit));
      expect(await purge(cutoff - 60_000, 10)).toEqual({ purged: 0, more: false });
      expect(await stored()).toBe(35);
      const batches = [];
      for (let more = true; more; ) {
        const result = await purge(cutoff, 7);
        batches.push(result.purged);
        more = result.more;
      }
      expect(batches.reduce((sum, n) => sum + n, 0)).toBe(30);
      expect(Math.max(...batches)).toBe(7);
      expect(await purge(cutoff, 7)).toEqual({ purged: 0, more: false });
      const left = (await broker.list({ participant: "bob", limit: 100 })).items;
      expect(left).toHaveLength(5);
      expect(left.every((record) => Date.parse(record.queuedAt) > cutoff)).toBe(true);
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
