import { describe, expect, it } from "vitest";
import type { Broker, Delivery } from "../../src/broker/index.js";
import type { SuiteContext } from "./conformance.js";
import {
  deliveredBefore,
  eventually,
  expectBrokerError,
  holdUntilKilled,
  message,
  type Reader,
  reader,
} from "./support.js";

/** Long enough that a delivery arriving within a reader's timeout (10 s) did not wait for it. */
const LONG_ACK_WAIT = { ackWaitMs: 30_000 };

/** A message `alice` sent (what `submitAll` submits), by its id. */
const alices = (id: string) => ({ from: "alice", id });

async function submitAll(broker: Broker, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const input = message("alice", "bob");
    await broker.submit(input);
    ids.push(input.id);
  }
  return ids;
}

async function take(inbox: Reader, count: number): Promise<Delivery[]> {
  const deliveries: Delivery[] = [];
  for (let i = 0; i < count; i++) deliveries.push(await inbox.next());
  return deliveries;
}

const summary = (deliveries: Delivery[]) => deliveries.map((d) => [d.id, d.attempt]);

/** Closing an inbox (a dropped WebSocket) and opening it again; a gateway that dies instead. */
export function resumeConformance(ctx: SuiteContext): void {
  describe("resume", () => {
    it("gives unacknowledged deliveries back at once and in order when the inbox closes", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: LONG_ACK_WAIT });
      const [m1, m2, m3, m4] = await submitAll(broker, 4);
      const first = await broker.openInbox("bob", { maxInFlight: 3 });
      const before = await take(reader(first), 3);
      expect(summary(before)).toEqual([
        [m1, 1],
        [m2, 1],
        [m3, 1],
      ]);
      await broker.ack("bob", alices(m2!));
      await first.close();
      // No ack wait (30 s) has run out: all of it comes back within the reader's 10 s, in order.
      // m1, the oldest hand-out the agent had, counts as an attempt; m3 was queued behind it.
      const again = reader(await broker.openInbox("bob", { maxInFlight: 8 }));
      expect(summary(await take(again, 3))).toEqual([
        [m1, 2],
        [m3, 1],
        [m4, 1],
      ]);
      expect(await broker.status(alices(m3!))).toMatchObject({ status: "delivered", retryCount: 0 });
      for (const id of [m1, m3, m4]) await broker.ack("bob", alices(id!));
      expect(await deliveredBefore(broker, again, "bob")).toEqual([]);
    });

    it("lets no attempt limit run out on a flapping connection while the agent makes progress", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ...LONG_ACK_WAIT, maxDeliver: 2 } });
      const ids = await submitAll(broker, 6);
      const attempts = new Map<string, number[]>();
      // Each connection: everything left is handed out, the agent acknowledges one, the connection drops.
      for (let left = ids.length; left > 0; left--) {
        const inbox = await broker.openInbox("bob", { maxInFlight: 8 });
        const deliveries = await take(reader(inbox), left);
        for (const d of deliveries) attempts.set(d.id, [...(attempts.get(d.id) ?? []), d.attempt]);
        await broker.ack("bob", deliveries[0]!);
        await inbox.close();
      }
      // Counting every given-back hand-out would have dead-lettered the last ones after two drops.
      for (const id of ids) expect((await broker.status(alices(id)))?.status).toBe("acknowledged");
      expect(attempts.get(ids[5]!)).toEqual([1, 1, 1, 1, 1, 2]);
      expect(Math.max(...[...attempts.values()].flat())).toBe(2);
    });

    it("dead-letters a message the agent never gets past (it drops the connection every time)", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ...LONG_ACK_WAIT, maxDeliver: 3 } });
      const [poison, after1, after2] = await submitAll(broker, 3);
      for (let attempt = 1; attempt <= 3; attempt++) {
        const inbox = await broker.openInbox("bob");
        expect(summary(await take(reader(inbox), 3))).toEqual([
          [poison, attempt],
          [after1, 1],
          [after2, 1],
        ]);
        await inbox.close();
      }
      const inbox = reader(await broker.openInbox("bob"));
      expect(summary(await take(inbox, 2))).toEqual([
        [after1, 1],
        [after2, 1],
      ]);
      const status = await eventually(async () => {
        const current = await broker.status(alices(poison!));
        expect(current?.status).toBe("failed");
        return current!;
      });
      expect(status).toMatchObject({ retryCount: 2, deadLetter: { reason: "max-deliveries" } });
      expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    });

    it("opens again while the previous inbox is still closing, its deliveries first", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: LONG_ACK_WAIT });
      const [m1, m2] = await submitAll(broker, 2);
      const first = await broker.openInbox("bob");
      await take(reader(first), 2);
      const closing = first.close();
      const second = reader(await broker.openInbox("bob"));
      const m3 = message("alice", "bob");
      await broker.submit(m3);
      expect(summary(await take(second, 3))).toEqual([
        [m1, 2],
        [m2, 1],
        [m3.id, 1],
      ]);
      await closing;
    });

    it("counts a delivery out when its gateway died; the last one ends failed with no inbox open", async () => {
      const harness = await ctx.harness();
      const delivery = { ackWaitMs: 600, maxDeliver: 2 };
      const setup = await harness.open({ delivery });
      const input = message("alice", "bob");
      await setup.submit(input);
      await setup.close(); // the embedded store allows one process at a time
      // A gateway hands it out twice (the first ack wait runs out), then dies with the last one out.
      const handed = await holdUntilKilled({ ...harness.store, delivery }, "bob", (seen) =>
        seen.some((h) => h.attempt === 2),
      );
      expect(handed).toEqual([
        { id: input.id, attempt: 1 },
        { id: input.id, attempt: 2 },
      ]);
      // Nobody opens bob's inbox again: the message still ends failed once that ack wait is over.
      const broker = await ctx.open(harness, { delivery });
      const status = await eventually(async () => {
        const current = await broker.status(input);
        expect(current?.status).toBe("failed");
        return current!;
      });
      expect(status).toMatchObject({ retryCount: 1, deadLetter: { reason: "max-deliveries" } });
      expect(status.lastError).toMatch(/2 deliveries/);
      await expectBrokerError(broker.ack("bob", input), "invalid_state");
      const failed = await broker.list({ participant: "alice", status: "failed" });
      expect(failed.items.map((item) => item.id)).toEqual([input.id]);
    });
  });
}
