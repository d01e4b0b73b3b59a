import { describe, expect, it } from "vitest";
import type { BrokerEvent, MessageStatus, SubmitInput } from "../../src/broker/index.js";
import type { SuiteContext } from "./conformance.js";
import { deliveredBefore, eventually, expectBrokerError, message, reader, workedOnWhile } from "./support.js";

/** Submit, dedup, order, offline queue, ack, redelivery, dead letters, reject. */
export function deliveryConformance(ctx: SuiteContext): void {
  describe("submit", () => {
    it("persists the message as queued and returns it unchanged from get()", async () => {
      const broker = await ctx.open(await ctx.harness());
      const input = message("alice", "bob", { kind: "request", method: "agent.request" });
      expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: false });
      const stored = await broker.get(input);
      expect(stored).toMatchObject({
        id: input.id,
        from: "alice",
        to: "bob",
        kind: "request",
        method: "agent.request",
        submittedAt: input.submittedAt,
        status: "queued",
        retryCount: 0,
        envelope: input.envelope,
      });
      expect(Date.parse(stored?.queuedAt ?? "")).not.toBeNaN();
      expect(await broker.get({ from: "alice", id: "unknown-message-id" })).toBeNull();
      // The gateway's default envelope limit (1 MiB) needs the NATS server's max_payload raised.
      expect(broker.maxEnvelopeBytes).toBeGreaterThan(64 * 1024);
      expect(await broker.status({ from: "alice", id: "unknown-message-id" })).toBeNull();
    });

    it("reports a second submit of the same id as a duplicate and delivers it once", async () => {
      const broker = await ctx.open(await ctx.harness());
      const first = message("alice", "bob");
      expect((await broker.submit(first)).duplicate).toBe(false);
      expect(await broker.submit(first)).toEqual({ id: first.id, status: "queued", duplicate: true });
      const marker = message("alice", "bob");
      await broker.submit(marker);
      const inbox = reader(await broker.openInbox("bob"));
      expect((await inbox.next()).id).toBe(first.id);
      // A second stored copy would come before the marker: order is per pair.
      expect((await inbox.next()).id).toBe(marker.id);
      await broker.ack("bob", first);
      expect(await broker.submit(first)).toEqual({ id: first.id, status: "acknowledged", duplicate: true });
    });

    it("gives every sender its own ids: another sender's message with the same id is another message", async () => {
      const broker = await ctx.open(await ctx.harness());
      const original = message("alice", "bob");
      // Mallory squats the id first, to the same recipient: it neither blocks nor reveals alice's.
      const squat = { ...message("mallory", "bob"), id: original.id };
      expect(await broker.submit(squat)).toEqual({ id: original.id, status: "queued", duplicate: false });
      expect(await broker.submit(original)).toEqual({ id: original.id, status: "queued", duplicate: false });
      // Each sender's resubmission is still its own duplicate: exactly once per sender and id.
      expect(await broker.submit(original)).toMatchObject({ duplicate: true });
      expect(await broker.submit(squat)).toMatchObject({ duplicate: true });
      expect((await broker.get(original))?.envelope).toBe(original.envelope);
      expect((await broker.get(squat))?.envelope).toBe(squat.envelope);

      const inbox = reader(await broker.openInbox("bob"));
      const first = await inbox.next();
      const second = await inbox.next();
      expect([first, second].map((d) => [d.from, d.id, d.envelope])).toEqual([
        ["mallory", original.id, squat.envelope],
        ["alice", original.id, original.envelope],
      ]);
      // Settling one settles that one only.
      await broker.ack("bob", second);
      expect((await broker.status(original))?.status).toBe("acknowledged");
      expect((await broker.status(squat))?.status).toBe("delivered");
      await broker.reject("bob", first, "squatter");
      expect((await broker.status(squat))?.status).toBe("failed");
      expect((await broker.status(original))?.status).toBe("acknowledged");
      expect((await broker.list({ participant: "bob" })).items.map((m) => [m.from, m.status])).toEqual([
        ["mallory", "failed"],
        ["alice", "acknowledged"],
      ]);
      expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    });

    it("rejects malformed input naming the field", async () => {
      const broker = await ctx.open(await ctx.harness());
      const good = message("alice", "bob");
      await expectBrokerError(broker.submit({ ...good, id: "short" }), "invalid_argument", "id");
      await expectBrokerError(broker.submit({ ...good, to: "bob.inbox" }), "invalid_argument", "to");
      await expectBrokerError(broker.submit({ ...good, from: "" }), "invalid_argument", "from");
      await expectBrokerError(
        broker.submit({ ...good, kind: "gossip" as unknown as "request" }),
        "invalid_argument",
        "kind",
      );
      await expectBrokerError(broker.submit({ ...good, method: "has space" }), "invalid_argument", "method");
      await expectBrokerError(broker.submit({ ...good, envelope: "" }), "invalid_argument", "envelope");
      await expectBrokerError(broker.openInbox("no.dots"), "invalid_argument", "agentId");
      await expectBrokerError(broker.openInbox("bob", { maxInFlight: 0 }), "invalid_argument", "maxInFlight");
      await expectBrokerError(broker.submit({ ...good, to: "_Fed" }), "invalid_argument", "to");
      await expectBrokerError(broker.openInbox("_"), "invalid_argument", "agentId");
      expect(await broker.status(good)).toBeNull();
    });

    it("queues for a system inbox (a gateway's own queue, `_name`) like for an agent", async () => {
      const broker = await ctx.open(await ctx.harness());
      const out = message("alice", "_fed_b_example");
      await broker.submit(out);
      const back = message("_fed_b_example", "alice");
      await broker.submit(back);
      const queue = reader(await broker.openInbox("_fed_b_example"));
      const delivery = await queue.next();
      expect(delivery).toMatchObject({ id: out.id, from: "alice", to: "_fed_b_example" });
      expect((await broker.ack("_fed_b_example", out)).status).toBe("acknowledged");
      expect((await broker.list({ participant: "alice" })).items.map((m) => m.id)).toEqual([out.id, back.id]);
    });
  });

  describe("delivery", () => {
    it("delivers in submit order per sender→recipient pair, queued while the recipient is offline", async () => {
      const broker = await ctx.open(await ctx.harness());
      const sent: string[] = [];
      let first: SubmitInput | undefined;
      for (let i = 0; i < 40; i++) {
        const input = message(i % 2 === 0 ? "alice" : "carol", "bob");
        first ??= input;
        sent.push(input.id);
        await broker.submit(input);
      }
      expect((await broker.status(first!))?.status).toBe("queued");
      const inbox = reader(await broker.openInbox("bob", { maxInFlight: 8 }));
      const received: string[] = [];
      for (let i = 0; i < sent.length; i++) {
        const delivery = await inbox.next();
        expect(delivery.attempt).toBe(1);
        received.push(delivery.id);
        await broker.ack("bob", delivery);
      }
      expect(received).toEqual(sent);
    });

    it("delivers the queue an agent finds waiting highest priority first, one priority oldest first", async () => {
      const broker = await ctx.open(await ctx.harness());
      const queued = [
        message("alice", "bob", { priority: "low" }),
        message("alice", "bob"),
        message("carol", "bob", { priority: "critical" }),
        message("alice", "bob", { priority: "medium" }),
        message("carol", "bob", { priority: "high" }),
        message("alice", "bob", { priority: "critical" }),
      ];
      for (const input of queued) await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob", { maxInFlight: 8 }));
      const received: [string, string][] = [];
      for (let i = 0; i < queued.length; i++) {
        const delivery = await inbox.next();
        received.push([delivery.id, delivery.priority]);
        await broker.ack("bob", delivery);
      }
      const [low, plain, critical1, medium, high, critical2] = queued.map((q) => q.id);
      expect(received).toEqual([
        [critical1, "critical"],
        [critical2, "critical"],
        [high, "high"],
        [plain, "medium"],
        [medium, "medium"],
        [low, "low"],
      ]);
    });

    it("delivers messages submitted while the inbox is open, with their envelope and metadata", async () => {
      const broker = await ctx.open(await ctx.harness());
      const inbox = reader(await broker.openInbox("bob"));
      const input = message("alice", "bob", { kind: "handoff", method: "agent.handoff" });
      await broker.submit(input);
      const delivery = await inbox.next();
      expect(delivery).toMatchObject({
        id: input.id,
        from: "alice",
        to: "bob",
        kind: "handoff",
        method: "agent.handoff",
        envelope: input.envelope,
        submittedAt: input.submittedAt,
        attempt: 1,
        priority: "medium",
      });
      const status = await broker.status(input);
      expect(status?.status).toBe("delivered");
      expect(status?.retryCount).toBe(0);
    });

    it("acknowledges with timestamps in order; a second ack is harmless", async () => {
      const broker = await ctx.open(await ctx.harness());
      const seen: MessageStatus[] = [];
      const input = message("alice", "bob");
      await broker.events((event: BrokerEvent) => {
        if (event.type === "message.status" && event.message.id === input.id) seen.push(event.message.status);
      });
      await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      await inbox.next();
      const acked = await broker.ack("bob", input);
      expect(acked.status).toBe("acknowledged");
      const status = await broker.status(input);
      expect(status).toMatchObject({ status: "acknowledged", retryCount: 0 });
      const queuedAt = Date.parse(status!.queuedAt);
      const deliveredAt = Date.parse(status!.deliveredAt!);
      const acknowledgedAt = Date.parse(status!.acknowledgedAt!);
      expect(queuedAt).toBeLessThanOrEqual(deliveredAt);
      expect(deliveredAt).toBeLessThanOrEqual(acknowledgedAt);
      expect((await broker.ack("bob", input)).status).toBe("acknowledged");
      await eventually(async () => expect(seen).toEqual(["queued", "delivered", "acknowledged"]));
    });

    it("lets only the recipient acknowledge or reject; to anyone but the sender it is no message", async () => {
      const broker = await ctx.open(await ctx.harness());
      const input = message("alice", "bob");
      await broker.submit(input);
      await expectBrokerError(broker.ack("alice", input), "forbidden");
      // A third agent learns nothing: the same answer as for an id never used.
      const unknown = { from: "alice", id: "no-such-message-1" };
      const answers = await Promise.all([
        broker.ack("mallory", input).catch((e: Error) => e.message.replace(input.id, "ID")),
        broker.reject("mallory", input, "no").catch((e: Error) => e.message.replace(input.id, "ID")),
        broker.ack("bob", unknown).catch((e: Error) => e.message.replace(unknown.id, "ID")),
      ]);
      expect(answers).toEqual(["no message ID", "no message ID", "no message ID"]);
      await expectBrokerError(broker.ack("mallory", input), "not_found");
      await expectBrokerError(broker.ack("bob", unknown), "not_found");
      expect((await broker.status(input))?.status).toBe("queued");
      // Acknowledged before it was ever delivered (REST ack): the inbox must not hand it out.
      await broker.ack("bob", input);
      const marker = message("alice", "bob");
      await broker.submit(marker);
      const inbox = reader(await broker.openInbox("bob"));
      expect((await inbox.next()).id).toBe(marker.id);
    });

    it("redelivers an unacknowledged message after the ack wait, counting retries", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ackWaitMs: 300, maxDeliver: 5 } });
      const input = message("alice", "bob");
      await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      const first = await inbox.next();
      expect(first.attempt).toBe(1);
      const second = await inbox.next();
      expect(second).toMatchObject({ id: input.id, attempt: 2, envelope: input.envelope });
      expect(await broker.status(input)).toMatchObject({ status: "delivered", retryCount: 1 });
      await broker.ack("bob", input);
      expect(await broker.status(input)).toMatchObject({ status: "acknowledged", retryCount: 1 });
    });

    it("restarts a delivery's ack wait on working(): no redelivery while the recipient works on it", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ackWaitMs: 300, maxDeliver: 2 } });
      const input = message("alice", "bob");
      await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      const delivery = await inbox.next();
      expect(delivery).toMatchObject({ id: input.id, attempt: 1, ackWaitMs: 300 });
      // Four ack waits long (four later messages come again meanwhile): only `working` keeps it alive.
      const work = { agent: "bob", message: input, everyMs: 100 };
      expect(await workedOnWhile(broker, work, { inbox, agent: "bob", rounds: 4 })).toEqual([]);
      expect(await broker.status(input)).toMatchObject({ status: "delivered", retryCount: 0 });
      await broker.ack("bob", input);
      expect(await broker.status(input)).toMatchObject({ status: "acknowledged", retryCount: 0 });
    });

    it("refuses working() from another agent, for a message not out for delivery, or unknown", async () => {
      const broker = await ctx.open(await ctx.harness());
      const input = message("alice", "bob");
      await broker.submit(input);
      await expectBrokerError(broker.working("bob", input), "invalid_state");
      const inbox = reader(await broker.openInbox("bob"));
      await inbox.next();
      await expectBrokerError(broker.working("alice", input), "forbidden");
      await expectBrokerError(broker.working("carol", input), "not_found");
      await expectBrokerError(
        broker.working("bob", { from: "alice", id: "unknown-message-id" }),
        "not_found",
      );
      await broker.ack("bob", input);
      await expectBrokerError(broker.working("bob", input), "invalid_state");
    });

    it("starts a delivery's ack wait when it is taken, not while it waits in the inbox", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ackWaitMs: 300, maxDeliver: 2 } });
      const inputs = [message("alice", "bob"), message("alice", "bob"), message("alice", "bob")];
      for (const input of inputs) await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      const first = await inbox.next();
      // The consumer is busy for four ack waits (four messages to carol, taken after the others
      // reached bob's inbox, come again meanwhile); the others must not use up their deliveries.
      const carol = reader(await broker.openInbox("carol"));
      const work = { agent: "bob", message: first, everyMs: 100 };
      expect(await workedOnWhile(broker, work, { inbox: carol, agent: "carol", rounds: 4 })).toEqual([]);
      await broker.ack("bob", first);
      for (const input of inputs.slice(1)) {
        expect(await inbox.next()).toMatchObject({ id: input.id, attempt: 1 });
        await broker.ack("bob", input);
      }
      for (const input of inputs) {
        expect(await broker.status(input)).toMatchObject({ status: "acknowledged", retryCount: 0 });
      }
    });

    it("dead-letters after maxDeliver deliveries: failed, visible to the sender", async () => {
      const broker = await ctx.open(await ctx.harness(), {
        delivery: { ackWaitMs: 200, maxDeliver: 3, backoffFactor: 1.5 },
      });
      const failures: string[] = [];
      await broker.events((event) => {
        if (event.type === "message.status" && event.message.status === "failed")
          failures.push(event.message.id);
      });
      const input = message("alice", "bob");
      await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      expect((await inbox.next()).attempt).toBe(1);
      expect((await inbox.next()).attempt).toBe(2);
      expect((await inbox.next()).attempt).toBe(3);
      const status = await eventually(async () => {
        const current = await broker.status(input);
        expect(current?.status).toBe("failed");
        return current!;
      });
      expect(status.retryCount).toBe(2);
      expect(status.deadLetter?.reason).toBe("max-deliveries");
      expect(status.lastError).toMatch(/3 deliveries/);
      expect(Date.parse(status.failedAt!)).not.toBeNaN();
      await eventually(async () => expect(failures).toContain(input.id));
      await expectBrokerError(broker.ack("bob", input), "invalid_state");
      const list = await broker.list({ participant: "alice", status: "failed" });
      expect(list.items.map((item) => item.id)).toEqual([input.id]);
    });

    it("retries 5 times after the first delivery by default (the platform flavour's rule), then dead-letters", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ackWaitMs: 150, backoffFactor: 1 } });
      const input = message("alice", "bob");
      await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      for (let attempt = 1; attempt <= 6; attempt++) expect((await inbox.next()).attempt).toBe(attempt);
      const status = await eventually(async () => {
        const current = await broker.status(input);
        expect(current?.status).toBe("failed");
        return current!;
      });
      expect(status).toMatchObject({ retryCount: 5, deadLetter: { reason: "max-deliveries" } });
      expect(status.lastError).toMatch(/6 deliveries/);
    });

    it("rejects with a reason: failed with a dead-letter record, never redelivered", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ackWaitMs: 300 } });
      const input = message("alice", "bob");
      await broker.submit(input);
      const inbox = reader(await broker.openInbox("bob"));
      await inbox.next();
      await expectBrokerError(broker.reject("bob", input, ""), "invalid_argument", "reason");
      const rejected = await broker.reject("bob", input, "not my department");
      expect(rejected.status).toBe("failed");
      const status = await broker.status(input);
      expect(status?.deadLetter).toMatchObject({ reason: "rejected" });
      expect(status?.lastError).toContain("not my department");
      await expectBrokerError(broker.reject("bob", input, "again"), "invalid_state");
      // Not even after its ack wait ran out.
      expect(await deliveredBefore(broker, inbox, "bob", { redelivered: true })).toEqual([]);
    });

    it("allows one open inbox per agent per broker", async () => {
      const broker = await ctx.open(await ctx.harness());
      const inbox = await broker.openInbox("bob");
      await expectBrokerError(broker.openInbox("bob"), "invalid_state");
      await inbox.close();
      const reopened = await broker.openInbox("bob");
      await reopened.close();
      // Two opens at once: exactly one wins.
      const both = await Promise.allSettled([broker.openInbox("carol"), broker.openInbox("carol")]);
      expect(both.filter((result) => result.status === "fulfilled")).toHaveLength(1);
      const loser = both.find((result) => result.status === "rejected");
      expect((loser as PromiseRejectedResult).reason).toMatchObject({ kind: "invalid_state" });
    });
  });
}
