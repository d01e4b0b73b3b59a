import { describe, expect, it } from "vitest";
import type { BrokerEvent, KvChange, SubmitInput } from "../../src/broker/index.js";
import type { SuiteContext } from "./conformance.js";
import { deliveredBefore, eventually, expectBrokerError, message, reader } from "./support.js";

/** Listing, retention, keyed state, change events and persistence. */
export function stateConformance(ctx: SuiteContext): void {
  describe("list", () => {
    it("filters by from, to, kind, method and status, only within the participant's messages", async () => {
      const broker = await ctx.open(await ctx.harness());
      const ab1 = message("alice", "bob", { kind: "request", method: "agent.request" });
      const ba = message("bob", "alice", { kind: "response", method: "agent.response" });
      const ab2 = message("alice", "bob");
      const cd = message("carol", "dave");
      const aa = message("alice", "alice");
      // bob's messages with carol: in bob's list, never in alice's, whatever she filters by.
      const bc = message("bob", "carol");
      const cb = message("carol", "bob");
      for (const input of [ab1, ba, ab2, cd, aa, bc, cb]) await broker.submit(input);
      await broker.ack("bob", ab2);

      const ids = async (query: Parameters<typeof broker.list>[0]) =>
        (await broker.list(query)).items.map((item) => item.id);
      expect(await ids({ participant: "alice" })).toEqual([ab1.id, ba.id, ab2.id, aa.id]);
      expect(await ids({ participant: "bob" })).toEqual([ab1.id, ba.id, ab2.id, bc.id, cb.id]);
      expect(await ids({ participant: "alice", to: "bob" })).toEqual([ab1.id, ab2.id]);
      expect(await ids({ participant: "alice", from: "bob" })).toEqual([ba.id]);
      expect(await ids({ participant: "alice", from: "alice" })).toEqual([ab1.id, ab2.id, aa.id]);
      expect(await ids({ participant: "alice", to: "alice" })).toEqual([ba.id, aa.id]);
      expect(await ids({ participant: "bob", from: "alice", to: "bob" })).toEqual([ab1.id, ab2.id]);
      expect(await ids({ participant: "alice", from: "alice", to: "bob" })).toEqual([ab1.id, ab2.id]);
      expect(await ids({ participant: "alice", kind: "request" })).toEqual([ab1.id]);
      expect(await ids({ participant: "alice", method: "agent.response" })).toEqual([ba.id]);
      expect(await ids({ participant: "bob", status: "acknowledged" })).toEqual([ab2.id]);
      // Not a participant: carol→dave is invisible to alice, whatever the filters say.
      expect(await ids({ participant: "alice", from: "carol" })).toEqual([]);
      expect(await ids({ participant: "alice", from: "carol", to: "dave" })).toEqual([]);
      expect(await ids({ participant: "mallory" })).toEqual([]);
      const [first] = (await broker.list({ participant: "bob", to: "bob", limit: 1 })).items;
      expect(first).toMatchObject({ id: ab1.id, from: "alice", to: "bob", status: "queued", retryCount: 0 });
      expect(first).not.toHaveProperty("envelope");
    });

    it("hands out no next cursor once the messages a filter keeps are all listed", async () => {
      const broker = await ctx.open(await ctx.harness());
      const toBob = [message("alice", "bob"), message("alice", "bob"), message("alice", "bob")];
      for (const input of [
        toBob[0],
        message("alice", "carol"),
        toBob[1],
        message("carol", "alice"),
        toBob[2],
      ])
        await broker.submit(input as SubmitInput);
      await broker.submit(message("alice", "carol"));
      const ids = toBob.map((input) => input.id);
      const first = await broker.list({ participant: "alice", to: "bob", limit: 2 });
      expect(first.items.map((item) => item.id)).toEqual(ids.slice(0, 2));
      const second = await broker.list({
        participant: "alice",
        to: "bob",
        limit: 2,
        cursor: first.nextCursor as string,
      });
      expect(second.items.map((item) => item.id)).toEqual(ids.slice(2));
      expect(second.nextCursor).toBeNull();
      expect((await broker.list({ participant: "alice", to: "bob", limit: 3 })).nextCursor).toBeNull();
      expect((await broker.list({ participant: "bob", from: "alice", limit: 3 })).nextCursor).toBeNull();
      expect(
        (await broker.list({ participant: "alice", kind: "notification", limit: 7 })).nextCursor,
      ).toBeNull();
    });

    it("paginates with an opaque cursor and refuses a forged one", async () => {
      const broker = await ctx.open(await ctx.harness());
      const sent: string[] = [];
      for (let i = 0; i < 7; i++) {
        const input = message(i % 2 ? "alice" : "bob", i % 2 ? "bob" : "alice");
        sent.push(input.id);
        await broker.submit(input);
      }
      await broker.submit(message("carol", "dave"));
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await broker.list({ participant: "alice", limit: 3, ...(cursor ? { cursor } : {}) });
        seen.push(...page.items.map((item) => item.id));
        cursor = page.nextCursor ?? undefined;
        pages++;
      } while (cursor && pages < 10);
      expect(seen).toEqual(sent);
      expect(pages).toBe(3);
      await expectBrokerError(
        broker.list({ participant: "alice", cursor: "not-a-cursor" }),
        "invalid_argument",
        "cursor",
      );
      await expectBrokerError(broker.list({ participant: "alice", limit: 0 }), "invalid_argument", "limit");
      await expectBrokerError(broker.list({ participant: "a.b" }), "invalid_argument", "participant");
    });
  });

  describe("sendersTo", () => {
    it("finds who sent the recipient a message with an id, waiting ones first, and only to that recipient", async () => {
      const broker = await ctx.open(await ctx.harness());
      const id = `shared-${Date.now().toString(36)}`;
      // alice's to bob is settled, carol's to bob waits, dave's (same id) went to erin.
      for (const input of [message("alice", "bob", { id }), message("carol", "bob", { id })])
        await broker.submit(input);
      await broker.submit(message("dave", "erin", { id }));
      await broker.submit(message("alice", "bob", { id: `${id}-alone` }));
      await broker.ack("bob", { from: "alice", id });

      // The waiting one is what an acknowledgement by id means; with none waiting, any.
      expect(await broker.sendersTo("bob", id)).toEqual(["carol"]);
      await broker.ack("bob", { from: "carol", id });
      expect((await broker.sendersTo("bob", id)).sort()).toEqual(["alice", "carol"]);
      expect(await broker.sendersTo("erin", id)).toEqual(["dave"]);
      expect(await broker.sendersTo("bob", `${id}-alone`)).toEqual(["alice"]);
      await broker.ack("bob", { from: "alice", id: `${id}-alone` });
      expect(await broker.sendersTo("bob", `${id}-alone`)).toEqual(["alice"]);
      // Neither a recipient's nor anyone's: nothing, as for a never-used id.
      expect(await broker.sendersTo("alice", id)).toEqual([]);
      expect(await broker.sendersTo("bob", "never-used-0001")).toEqual([]);
      await expectBrokerError(broker.sendersTo("bob", "has space"), "invalid_argument");
    });
  });

  describe("retention", () => {
    it("expires messages after the retention period: status expired, envelope gone, never delivered", async () => {
      const broker = await ctx.open(await ctx.harness(), { retentionMs: 1_500 });
      const old = message("alice", "bob");
      await broker.submit(old);
      const expired = await eventually(async () => {
        const status = await broker.status(old);
        expect(status?.status).toBe("expired");
        return status!;
      });
      expect(Date.parse(expired.expiredAt!)).toBeGreaterThanOrEqual(Date.parse(expired.queuedAt) + 1_500);
      expect((await broker.get(old))?.envelope).toBeNull();
      const fresh = message("alice", "bob");
      await broker.submit(fresh);
      const inbox = reader(await broker.openInbox("bob"));
      expect((await inbox.next()).id).toBe(fresh.id);
      expect((await broker.list({ participant: "bob", status: "expired" })).items.map((m) => m.id)).toEqual([
        old.id,
      ]);
    });
  });

  describe("kv", () => {
    it("gets, puts, creates, updates with compare-and-set, deletes and lists keys", async () => {
      const broker = await ctx.open(await ctx.harness());
      const kv = broker.kv<{ n: number }>("things");
      expect(await kv.get("a")).toBeNull();
      const r1 = await kv.create("a", { n: 1 });
      expect(await kv.get("a")).toEqual({ key: "a", value: { n: 1 }, revision: r1 });
      await expectBrokerError(kv.create("a", { n: 2 }), "exists");
      const r2 = await kv.update("a", { n: 2 }, r1);
      expect(r2).toBeGreaterThan(r1);
      await expectBrokerError(kv.update("a", { n: 3 }, r1), "conflict");
      expect((await kv.get("a"))?.value).toEqual({ n: 2 });
      const r3 = await kv.put("a", { n: 4 });
      expect(r3).toBeGreaterThan(r2);
      await kv.put("group.x", { n: 5 });
      await kv.put("group.y", { n: 6 });
      await kv.put("groupie", { n: 7 });
      expect(await kv.keys()).toEqual(["a", "group.x", "group.y", "groupie"]);
      expect(await kv.keys("group.")).toEqual(["group.x", "group.y"]);
      expect(await kv.keys("group")).toEqual(["group.x", "group.y", "groupie"]);
      await kv.delete("a");
      expect(await kv.get("a")).toBeNull();
      await expectBrokerError(kv.update("a", { n: 8 }, r3), "conflict");
      expect(await kv.create("a", { n: 9 })).toBeGreaterThan(r3);
      // Buckets are separate.
      expect(await broker.kv("other").get("a")).toBeNull();
      expect(() => broker.kv("bad name")).toThrow(/bucket/);
      await expectBrokerError(kv.get(".a"), "invalid_argument", "key");
      await expectBrokerError(
        kv.put("a", undefined as unknown as { n: number }),
        "invalid_argument",
        "value",
      );
    });

    it("reports changes to watchers and to broker events", async () => {
      const broker = await ctx.open(await ctx.harness());
      const kv = broker.kv<string>("presence-test");
      const changes: Array<KvChange<string>> = [];
      const scoped: string[] = [];
      const events: BrokerEvent[] = [];
      const stop = await kv.watch((change) => changes.push(change));
      await kv.watch((change) => scoped.push(change.key), { prefix: "agent." });
      await broker.events((event) => {
        if (event.type === "kv") events.push(event);
      });
      const revision = await kv.put("agent.bob", "online");
      await kv.put("other", "x");
      await kv.delete("agent.bob");
      await eventually(async () => expect(changes).toHaveLength(3));
      expect(changes[0]).toEqual({
        bucket: "presence-test",
        key: "agent.bob",
        op: "put",
        value: "online",
        revision,
      });
      expect(changes[2]).toMatchObject({ key: "agent.bob", op: "delete", value: null });
      await eventually(async () => expect(scoped).toEqual(["agent.bob", "agent.bob"]));
      await eventually(async () =>
        expect(events).toEqual([
          { type: "kv", bucket: "presence-test", key: "agent.bob", op: "put", value: "online" },
          { type: "kv", bucket: "presence-test", key: "other", op: "put", value: "x" },
          { type: "kv", bucket: "presence-test", key: "agent.bob", op: "delete", value: null },
        ]),
      );
      stop();
      await kv.put("after-stop", "y");
      await eventually(async () => expect(events).toHaveLength(4));
      expect(changes).toHaveLength(3);
    });
  });

  describe("persistence", () => {
    it("keeps messages, statuses and kv across close and reopen", async () => {
      const harness = await ctx.harness();
      const first = await ctx.open(harness, { delivery: { ackWaitMs: 300 } });
      const acked = message("alice", "bob");
      const pending = message("alice", "bob");
      await first.submit(acked);
      await first.submit(pending);
      const inbox = await first.openInbox("bob", { maxInFlight: 1 });
      expect((await reader(inbox).next()).id).toBe(acked.id);
      // Closed before the ack, so `pending` is never handed out; the ack comes the REST way.
      await inbox.close();
      await first.ack("bob", acked);
      const revision = await first.kv("state").put("k", { kept: true });
      await first.close();

      const second = await ctx.open(harness, { delivery: { ackWaitMs: 300 } });
      expect((await second.status(acked))?.status).toBe("acknowledged");
      expect((await second.status(pending))?.status).toBe("queued");
      expect(await second.kv("state").get("k")).toEqual({ key: "k", value: { kept: true }, revision });
      // The dedup key (sender and id) is kept too.
      expect(await second.submit({ ...acked })).toMatchObject({ duplicate: true, status: "acknowledged" });
      const resumed = reader(await second.openInbox("bob"));
      expect(await resumed.next()).toMatchObject({ id: pending.id, attempt: 1 });
      await second.ack("bob", pending);
      expect(await deliveredBefore(second, resumed, "bob", { redelivered: true })).toEqual([]);
    });

    it("reports health and refuses use after close", async () => {
      const broker = await ctx.open(await ctx.harness());
      const healthy = await broker.health();
      expect(healthy.ok).toBe(true);
      // One line per part checked; `since` only comes with a problem.
      expect(Object.keys(healthy.detail).length).toBeGreaterThan(0);
      expect(Object.values(healthy.detail).every((line) => typeof line === "string" && line.length > 0)).toBe(
        true,
      );
      expect(healthy.detail).not.toHaveProperty("since");
      await broker.close();
      const closed = await broker.health();
      expect(closed.ok).toBe(false);
      expect(Object.values(closed.detail)).toContain("closed");
      await expectBrokerError(broker.submit(message("alice", "bob")), "closed");
    });

    it("refuses invalid options", async () => {
      const harness = await ctx.harness();
      await expectBrokerError(
        harness.open({ delivery: { ackWaitMs: 0 } }),
        "invalid_argument",
        "delivery.ackWaitMs",
      );
      await expectBrokerError(
        harness.open({ retentionMs: 10_000, recordRetentionMs: 1_000 }),
        "invalid_argument",
        "recordRetentionMs",
      );
    });
  });
}
