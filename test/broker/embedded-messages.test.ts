/**
 * The embedded broker's message table (src/broker/embedded/messages.ts) beyond what the
 * conformance suite reaches: writes that say whether they applied, the retention sweep's and the
 * record purge's batches at their cutoff, and the times a restart must keep.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { MessageRow } from "../../src/broker/embedded/messages.js";
import { DATABASE_FILE, type EmbeddedBroker, openBroker, type SubmitInput } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { message } from "./support.js";

const tmp = useTmpDir("acp-messages-");

const opened: EmbeddedBroker[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
});

async function open(data = tmp(), retentionMs?: number): Promise<EmbeddedBroker> {
  const broker = (await openBroker({ data, ...(retentionMs ? { retentionMs } : {}) })) as EmbeddedBroker;
  opened.push(broker);
  return broker;
}

/** Submits each message in a later millisecond than the one before, so each cutoff falls between two. */
async function submitApart(broker: EmbeddedBroker, inputs: SubmitInput[]): Promise<MessageRow[]> {
  const rows: MessageRow[] = [];
  for (const input of inputs) {
    const previous = rows.at(-1)?.queued_at ?? 0;
    while (Date.now() <= previous) await new Promise((resolve) => setImmediate(resolve));
    await broker.submit(input);
    await broker.status(input); // committed
    rows.push(broker.table.byRef(input)!);
  }
  return rows;
}

/** A store holding one message, closed, that message's queued_at then set to `queuedAt`. */
async function storedOnce(queuedAt: number): Promise<{ data: string; stored: SubmitInput }> {
  const data = tmp();
  const broker = await open(data);
  const stored = message("alice", "bob");
  await broker.submit(stored);
  await broker.close();
  const db = new Database(join(data, DATABASE_FILE));
  db.prepare("UPDATE messages SET queued_at = ?").run(queuedAt);
  db.close();
  return { data, stored };
}

describe("embedded message table", () => {
  it("says whether each write applied: a settled message is never changed again", async () => {
    const broker = await open();
    const [acked, rejected] = [message("alice", "bob"), message("alice", "bob")];
    for (const input of [acked, rejected]) await broker.submit(input);
    const { table } = broker;
    const now = Date.now();
    const out = (input: SubmitInput): MessageRow => ({
      ...table.byRef(input)!,
      delivered_at: now,
      attempts: 1,
      next_attempt_at: now + 60_000,
    });
    const writes = await broker.commits.run(() => [
      table.markDelivered(out(acked)),
      table.markAcknowledged(out(acked), now),
      table.markDelivered(out(acked)),
      table.markAcknowledged(out(acked), now + 1),
      table.markFailed(out(acked), now, "rejected", "too late"),
      table.markFailed(out(rejected), now, "rejected", "not wanted"),
      table.markAcknowledged(out(rejected), now),
      table.markFailed(out(rejected), now + 1, "rejected", "twice"),
    ]);
    expect(writes).toEqual([true, true, false, false, false, true, false, false]);
    expect(await broker.status(acked)).toMatchObject({
      status: "acknowledged",
      acknowledgedAt: new Date(now).toISOString(),
    });
    expect(await broker.status(rejected)).toMatchObject({
      status: "failed",
      deadLetter: { reason: "rejected", detail: "not wanted" },
    });
  });

  it("drops envelopes up to the cutoff, the message queued at it included, and says when more may be due", async () => {
    const broker = await open();
    const inputs = Array.from({ length: 5 }, () => message("alice", "bob"));
    const rows = await submitApart(broker, inputs);
    await broker.ack("bob", inputs[1]!);
    const expire = (cutoff: number, limit: number) =>
      broker.commits.run(() => {
        const { expired, dropped, more } = broker.table.expireThrough(cutoff, limit);
        return { expired: expired.map((row) => row.seq), dropped: dropped.map((row) => row.seq), more };
      });
    const ids = (...at: number[]) => at.map((i) => rows[i]!.seq);

    expect(await expire(rows[0]!.queued_at - 1, 10)).toEqual({ expired: [], dropped: [], more: false });
    // The cutoff is the first message's time: it goes, the second (a millisecond later) stays.
    expect(await expire(rows[0]!.queued_at, 2)).toEqual({ expired: ids(0), dropped: ids(0), more: false });
    // A full batch: more may be due.
    expect(await expire(rows[2]!.queued_at, 2)).toEqual({ expired: ids(2), dropped: ids(1, 2), more: true });
    // Everything due, fewer rows than the batch: done.
    expect(await expire(Date.now(), 10)).toEqual({ expired: ids(3, 4), dropped: ids(3, 4), more: false });
    expect(await expire(Date.now(), 10)).toEqual({ expired: [], dropped: [], more: false });
    expect(broker.table.expiredThroughSeq()).toBe(rows[4]!.seq);
    expect(await broker.get(inputs[0]!)).toMatchObject({ status: "expired", envelope: null });
    expect(await broker.get(inputs[1]!)).toMatchObject({ status: "acknowledged", envelope: null });
  });

  it("purges records up to the cutoff, the one queued at it included, and says when more may be due", async () => {
    const broker = await open();
    const purge = (cutoff: number, limit: number) =>
      broker.commits.run(() => broker.table.purgeThrough(cutoff, limit));
    expect(await purge(Date.now(), 10)).toEqual({ purged: 0, more: false }); // an empty table
    const inputs = Array.from({ length: 5 }, () => message("alice", "bob"));
    const rows = await submitApart(broker, inputs);

    expect(await purge(rows[0]!.queued_at - 1, 10)).toEqual({ purged: 0, more: false });
    expect(await purge(rows[0]!.queued_at, 2)).toEqual({ purged: 1, more: false });
    expect(await purge(rows[2]!.queued_at, 2)).toEqual({ purged: 2, more: true });
    expect(await purge(Date.now(), 10)).toEqual({ purged: 2, more: false });
    expect(await purge(Date.now(), 10)).toEqual({ purged: 0, more: false });
    expect(await broker.status(inputs[0]!)).toBeNull();
    expect(await broker.status(inputs[4]!)).toBeNull();
  });

  it("queues after the newest stored message after a restart, even with the clock behind it", async () => {
    // The clock went back a minute since that message was queued.
    const ahead = Date.now() + 60_000;
    const { data } = await storedOnce(ahead);
    const again = await open(data);
    const after = message("alice", "bob");
    await again.submit(after);
    expect(Date.parse((await again.status(after))!.queuedAt)).toBe(ahead);
  });

  it("gives no envelope past the retention period, before the sweep has dropped it", async () => {
    const { data, stored: old } = await storedOnce(Date.now() - 2 * 3_600_000);
    // Its first sweep comes a second after opening at the earliest.
    const again = await open(data, 3_600_000);
    expect(await again.get(old)).toMatchObject({ id: old.id, status: "expired", envelope: null });
    expect(again.table.envelope(again.table.byRef(old)!.seq)).not.toBeNull(); // not swept yet
    // Its envelope goes at the millisecond its retention ends, not one later (the clock faked).
    const fresh = message("alice", "bob");
    await again.submit(fresh);
    const endsAt = again.table.byRef(fresh)!.queued_at + 3_600_000;
    const clock = vi.spyOn(Date, "now");
    try {
      clock.mockReturnValue(endsAt - 1);
      expect((await again.get(fresh))?.envelope).toBe(fresh.envelope);
      clock.mockReturnValue(endsAt);
      expect((await again.get(fresh))?.envelope).toBeNull();
    } finally {
      clock.mockRestore();
    }
  });
});
