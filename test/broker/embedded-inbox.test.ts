/**
 * The embedded inbox's own bookkeeping, beyond what the conformance suite covers: what a dead
 * process held, the hand-over between rows kept in memory and the pager past one page, which
 * hand-out counts as an attempt when several come back, and the in-flight limit.
 */
import { copyFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EmbeddedInbox } from "../../src/broker/embedded/inbox.js";
import {
  type Broker,
  DATABASE_FILE,
  type Delivery,
  openBroker,
  type SubmitInput,
} from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveredBefore, eventually, exchange, message, reader, routedTo, sleep } from "./support.js";

const tmp = useTmpDir("acp-inbox-");
const LONG_ACK_WAIT = { ackWaitMs: 30_000 };
/** More than the rows an inbox reads at a time (and keeps in memory ahead of delivery). */
const MORE_THAN_A_PAGE = 300;
/** The rows an inbox reads at a time: a page this full means more may follow. */
const A_PAGE = 256;

const opened: Broker[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
});

async function open(data: string): Promise<Broker> {
  const broker = await openBroker({ data, delivery: LONG_ACK_WAIT });
  opened.push(broker);
  return broker;
}

const summary = (deliveries: Delivery[]) => deliveries.map((d) => [d.id, d.attempt]);

describe("embedded inbox", () => {
  it("hands out at once what a process that died held, counting only the oldest as an attempt", async () => {
    const data = tmp();
    const broker = await open(data);
    const [m1, m2, m3] = [message("alice", "bob"), message("alice", "bob"), message("alice", "bob")];
    for (const input of [m1, m2, m3]) await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 2 }));
    for (const input of [m1, m2]) expect((await inbox.next()).id).toBe(input!.id);
    await broker.working("bob", m2!); // its ack wait starts again: still running at the crash
    await broker.status(m2!); // the hand-outs' bookkeeping is committed
    // The database as a process killed now leaves it (its file and write-ahead log): both out,
    // their ack waits (30 s) running, and no inbox of the next process holding them.
    const dead = tmp();
    for (const file of readdirSync(data)) copyFileSync(join(data, file), join(dead, file));

    const next = await open(dead);
    const again = reader(await next.openInbox("bob", { maxInFlight: 8 }));
    const deliveries = [await again.next(), await again.next(), await again.next()];
    expect(summary(deliveries)).toEqual([
      [m1!.id, 2],
      [m2!.id, 1],
      [m3!.id, 1],
    ]);
    expect(await next.status(m2!)).toMatchObject({ status: "delivered", retryCount: 0 });
  });

  it("closes when its consumer leaves the loop: what it held goes out again at once", async () => {
    const broker = await open(tmp());
    const input = message("alice", "bob");
    await broker.submit(input);
    for await (const delivery of await broker.openInbox("bob")) {
      expect(delivery).toMatchObject({ id: input.id, attempt: 1 });
      break;
    }
    // Another inbox of the agent may open now, and gets it within the reader's 10 s, not the 30 s ack wait.
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: input.id, attempt: 2 });
  });

  it("leaves an answer out through the agent's routed receiver to it: an inbox opened meanwhile does not hand it out", async () => {
    const broker = await open(tmp());
    const { got: routed } = routedTo(broker, "alice");
    const { answer } = await exchange(broker, `${broker.instanceId}/socket-1`);
    await eventually(async () => expect(routed.map((delivery) => delivery.id)).toEqual([answer.id]));
    const inbox = reader(await broker.openInbox("alice"));
    expect(await deliveredBefore(broker, inbox, "alice")).toEqual([]);
    await broker.ack("alice", answer);
    expect(await broker.status(answer)).toMatchObject({ status: "acknowledged", retryCount: 0 });
  });

  it("drops a message settled while it waits in memory behind the in-flight limit", async () => {
    const broker = await open(tmp());
    const [m1, first, m2, m3] = [
      message("alice", "bob"),
      message("dave", "bob"),
      message("alice", "bob"),
      message("alice", "bob"),
    ];
    for (const input of [m1, first, m2, m3]) await broker.submit(input);
    // Behind m1: dave's, m2 and m3, then two senders' messages under one id.
    const fromAlice = message("alice", "bob");
    const fromCarol = { ...message("carol", "bob"), id: fromAlice.id };
    for (const input of [fromAlice, fromCarol]) await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 1 }));
    expect((await inbox.next()).id).toBe(m1!.id);
    // Still queued, read into the inbox's page: the first waiting, m3 behind another of alice's,
    // fromCarol behind fromAlice.
    await broker.reject("bob", first!, "not wanted");
    await broker.reject("bob", m3!, "not wanted");
    await broker.reject("bob", fromCarol, "not wanted either");
    await broker.ack("bob", m1!);
    const got = [];
    for (let i = 0; i < 2; i++) {
      const next = await inbox.next();
      got.push([next.from, next.id, next.attempt]);
      await broker.ack("bob", next);
    }
    expect(got).toEqual([
      ["alice", m2!.id, 1],
      ["alice", fromAlice.id, 1],
    ]);
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    for (const input of [first!, m3!])
      expect(await broker.status(input)).toMatchObject({
        status: "failed",
        deadLetter: { reason: "rejected" },
      });
    expect(await broker.status(fromCarol)).toMatchObject({
      status: "failed",
      deadLetter: { reason: "rejected" },
    });
    expect(await broker.status(fromAlice)).toMatchObject({ status: "acknowledged", retryCount: 0 });
  });

  /** m1 and m2 handed out by a process, and a copy of its store as it would leave it if killed now. */
  async function heldByDeadProcess() {
    const data = tmp();
    const broker = await open(data);
    const [m1, m2] = [message("alice", "bob"), message("alice", "bob")] as const;
    for (const input of [m1, m2]) await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 2 }));
    for (const input of [m1, m2]) expect((await inbox.next()).id).toBe(input.id);
    await broker.status(m2);
    const dead = tmp();
    for (const file of readdirSync(data)) copyFileSync(join(data, file), join(dead, file));
    const setDue = (input: SubmitInput, at: number) => {
      const db = new Database(join(dead, DATABASE_FILE));
      db.prepare("UPDATE messages SET next_attempt_at = ? WHERE id = ?").run(at, input.id);
      db.close();
    };
    return { dead, m1, m2, setDue };
  }

  it("counts each delivery a dead process held whose ack wait ran out meanwhile", async () => {
    const { dead, m1, m2, setDue } = await heldByDeadProcess();
    // Both ack waits ran out while no process ran.
    for (const input of [m1, m2]) setDue(input, Date.now() - 1_000);
    const again = reader(await (await open(dead)).openInbox("bob"));
    expect(summary([await again.next(), await again.next()])).toEqual([
      [m1.id, 2],
      [m2.id, 2],
    ]);
  });

  it("takes a delivery whose ack wait ends at this millisecond as due, not as a dead process's", async () => {
    const { dead, m1, m2, setDue } = await heldByDeadProcess();
    const now = Date.now() + 5_000; // the clock faked: m1's wait ends now, m2's runs on
    setDue(m1, now);
    setDue(m2, now + 30_000);
    const clock = vi.spyOn(Date, "now").mockReturnValue(now);
    try {
      const again = reader(await (await open(dead)).openInbox("bob"));
      // m1 counted as its ack wait ran out; m2 the dead process's oldest, counted too.
      expect(summary([await again.next(), await again.next()])).toEqual([
        [m1.id, 2],
        [m2.id, 2],
      ]);
    } finally {
      clock.mockRestore();
    }
  });

  it("does not hand out a message at the millisecond it expires", async () => {
    const retentionMs = 3_600_000;
    const broker = await openBroker({ data: tmp(), delivery: LONG_ACK_WAIT, retentionMs });
    opened.push(broker);
    const old = message("alice", "bob");
    await broker.submit(old);
    const expiresAt = Date.parse((await broker.status(old))!.queuedAt) + retentionMs;
    const clock = vi.spyOn(Date, "now").mockReturnValue(expiresAt); // the clock faked
    try {
      const inbox = reader(await broker.openInbox("bob"));
      expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    } finally {
      clock.mockRestore();
    }
  });

  /** m1 and m2 submitted and both handed out by an inbox of bob with room for two. */
  async function twoHandedOut() {
    const broker = await open(tmp());
    const [m1, m2] = [message("alice", "bob"), message("alice", "bob")] as const;
    for (const input of [m1, m2]) await broker.submit(input);
    const opened = await broker.openInbox("bob", { maxInFlight: 2 });
    const inbox = reader(opened);
    for (const input of [m1, m2]) expect((await inbox.next()).id).toBe(input.id);
    return { opened, inbox, m1, m2 };
  }

  it("puts hand-outs given back one by one in line by their place in the queue", async () => {
    const { opened, inbox, m1, m2 } = await twoHandedOut();
    await opened.giveBack([m1]);
    await opened.giveBack([m2]); // goes in behind m1, which waits already
    expect(summary([await inbox.next(), await inbox.next()])).toEqual([
      [m1.id, 2],
      [m2.id, 2],
    ]);
  });

  it("gives hand-outs back to a consumer already waiting oldest first", async () => {
    const { opened, inbox, m1, m2 } = await twoHandedOut();
    const next = inbox.next(); // asked before they come back
    await opened.giveBack([m1, m2]);
    expect(summary([await next, await inbox.next()])).toEqual([
      [m1.id, 2],
      [m2.id, 1],
    ]);
  });

  it("puts a hand-out given back ahead of a later message waiting in memory", async () => {
    const broker = await open(tmp());
    const [m1, m2] = [message("alice", "bob"), message("alice", "bob")];
    for (const input of [m1, m2]) await broker.submit(input);
    const opened = await broker.openInbox("bob", { maxInFlight: 1 });
    const inbox = reader(opened);
    expect((await inbox.next()).id).toBe(m1.id); // m2 waits behind it, in memory
    await opened.giveBack([m1]);
    const again = await inbox.next();
    await broker.ack("bob", again);
    expect(summary([again, await inbox.next()])).toEqual([
      [m1.id, 2],
      [m2.id, 1],
    ]);
  });

  it("keeps at most a page in memory: what is offered behind a full page is left to the pager", async () => {
    const broker = await open(tmp());
    const first = message("alice", "bob");
    await broker.submit(first);
    const opened = (await broker.openInbox("bob", { maxInFlight: 1 })) as EmbeddedInbox;
    expect((await reader(opened).next()).id).toBe(first.id); // the one slot taken: what follows waits
    const during = Array.from({ length: A_PAGE + 1 }, () => message("carol", "bob"));
    await Promise.all(during.map((input) => broker.submit(input)));
    expect(opened.live(during[A_PAGE - 1]!)).toMatchObject({ id: during[A_PAGE - 1]!.id });
    expect(opened.live(during[A_PAGE]!)).toBeUndefined();
  });

  it("puts a routed answer given back in line by its place in the queue", async () => {
    const broker = await open(tmp());
    const { got, receiver } = routedTo(broker, "alice");
    const [first, older] = [message("carol", "alice"), message("carol", "alice")];
    for (const input of [first, older]) await broker.submit(input);
    const inbox = reader(await broker.openInbox("alice", { maxInFlight: 1 }));
    expect((await inbox.next()).id).toBe(first.id); // `older` waits behind it
    const { answer } = await exchange(broker, `${broker.instanceId}/socket-1`);
    await eventually(async () => expect(got.map((delivery) => delivery.id)).toEqual([answer.id]));
    await receiver.giveBack([answer]);
    await broker.ack("alice", first);
    const second = await inbox.next();
    await broker.ack("alice", second);
    const third = await inbox.next();
    expect(summary([second, third])).toEqual([
      [older.id, 1],
      [answer.id, 1],
    ]);
    await broker.ack("alice", third);
    expect(await deliveredBefore(broker, inbox, "alice")).toEqual([]);
  });

  it("reads past a page of queued messages, and past a page offered while nobody reads", async () => {
    const data = tmp();
    const broker = await open(data);
    const before = Array.from({ length: MORE_THAN_A_PAGE }, () => message("alice", "bob"));
    for (const input of before) await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 1 }));
    const first = await inbox.next();
    // Offered while the inbox holds a page in memory already: the pager reads them later, in order.
    const during = Array.from({ length: MORE_THAN_A_PAGE }, () => message("carol", "bob"));
    for (const input of during) await broker.submit(input);
    const got = [first];
    await broker.ack("bob", first);
    while (got.length < before.length + during.length) {
      const delivery = await inbox.next();
      got.push(delivery);
      await broker.ack("bob", delivery);
    }
    expect(got.map((d) => `${d.from}/${d.id}/${d.attempt}`)).toEqual(
      [...before, ...during].map((input) => `${input.from}/${input.id}/1`),
    );
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
  });

  it("hands out no more than maxInFlight: the next waits for an acknowledgement", async () => {
    const broker = await open(tmp());
    const [m1, m2] = [message("alice", "bob"), message("alice", "bob")];
    for (const input of [m1, m2]) await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 1 }));
    expect((await inbox.next()).id).toBe(m1!.id);
    const next = inbox.next(); // the consumer asks; the one slot is taken
    expect(await broker.status(m2!)).toMatchObject({ status: "queued" });
    await broker.ack("bob", m1!);
    expect(await next).toMatchObject({ id: m2!.id, attempt: 1 });
  });

  it("gives back in queue order: the oldest one received counts, whatever the order handed out or named", async () => {
    const broker = await open(tmp());
    // The later one is urgent: it goes out first.
    const [low, urgent, third] = [
      message("alice", "bob", { priority: "low" }),
      message("alice", "bob", { priority: "critical" }),
      message("alice", "bob", { priority: "low" }),
    ];
    for (const input of [low, urgent, third]) await broker.submit(input);
    const opened = await broker.openInbox("bob", { maxInFlight: 3 });
    const inbox = reader(opened);
    expect(summary([await inbox.next(), await inbox.next(), await inbox.next()])).toEqual([
      [urgent!.id, 1],
      [low!.id, 1],
      [third!.id, 1],
    ]);
    // Named newest first: `low` is still the one the agent was working on (the oldest it has).
    await opened.giveBack([third!, urgent!, low!]);
    expect(summary([await inbox.next(), await inbox.next(), await inbox.next()])).toEqual([
      [urgent!.id, 1],
      [low!.id, 2],
      [third!.id, 1],
    ]);
    // Closing counts the same one again.
    await opened.close();
    const again = reader(await broker.openInbox("bob", { maxInFlight: 3 }));
    expect(summary([await again.next(), await again.next(), await again.next()])).toEqual([
      [urgent!.id, 1],
      [low!.id, 3],
      [third!.id, 1],
    ]);
  });

  it("skips what expired in memory, and hands out once what it read while a commit's messages were offered", async () => {
    const retentionMs = 1_500;
    const broker = await openBroker({ data: tmp(), delivery: LONG_ACK_WAIT, retentionMs });
    opened.push(broker);
    const old = Array.from({ length: A_PAGE - 1 }, () => message("alice", "bob", { priority: "low" }));
    await Promise.all(old.map((input) => broker.submit(input)));
    const oldAt = Date.parse((await broker.status(old.at(-1)!))!.queuedAt);
    await sleep(oldAt + 1_000 - Date.now());
    // A full first page: the old ones, and a later urgent one that goes out first.
    const urgent = message("carol", "bob", { priority: "critical" });
    await broker.submit(urgent);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 1 }));
    expect((await inbox.next()).id).toBe(urgent.id);
    await sleep(oldAt + retentionMs - Date.now()); // the old ones expired in memory, the urgent one not
    const next = inbox.next();
    // One commit: the ack frees the slot, the inbox skips every expired row and reads the next page
    // (these two), then the two are offered to it.
    const [a, b] = [message("dave", "bob"), message("dave", "bob")];
    await Promise.all([broker.ack("bob", urgent), broker.submit(a), broker.submit(b)]);
    const got = [await next];
    await broker.ack("bob", got[0]!);
    got.push(await inbox.next());
    await broker.ack("bob", got[1]!);
    expect(summary(got)).toEqual([
      [a.id, 1],
      [b.id, 1],
    ]);
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
  });
});
