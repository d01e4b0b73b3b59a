import { describe, expect, it } from "vitest";
import type { SubmitInput } from "../../src/broker/index.js";
import type { SuiteContext } from "./conformance.js";
import { eventually, expectBrokerError, message, reader } from "./support.js";

const bytesOf = (input: SubmitInput) => Buffer.byteLength(input.envelope);

export function quotaConformance(ctx: SuiteContext): void {
  describe("quotas", () => {
    it("refuses past a recipient's pending messages, stores nothing, and counts settled ones out", async () => {
      const broker = await ctx.open(await ctx.harness(), { quotas: { recipientPendingMessages: 3 } });
      const accepted = [message("alice", "bob"), message("alice", "bob"), message("mallory", "bob")];
      for (const input of accepted) await broker.submit(input);
      const over = message("mallory", "bob");
      const refusal = await expectBrokerError(broker.submit(over), "quota");
      expect(refusal.quota).toEqual({ quota: "recipient-pending-messages", limit: 3, used: 3 });
      expect(await broker.status(over)).toBeNull();
      // Another recipient is not affected.
      await broker.submit(message("mallory", "carol"));
      const sizes = accepted.map(bytesOf);
      expect(await broker.usage("bob")).toEqual({
        pendingMessages: 3,
        pendingBytes: sizes.reduce((a, b) => a + b, 0),
        storedBytes: 0,
      });
      // A resubmission of a stored message stores nothing: answered as a duplicate, never refused.
      expect(await broker.submit(accepted[0] as SubmitInput)).toMatchObject({ duplicate: true });

      // Acknowledged and rejected messages no longer wait: room for two more, and no third.
      await broker.ack("bob", accepted[0] as SubmitInput);
      await broker.reject("bob", accepted[1] as SubmitInput, "not wanted");
      expect((await broker.usage("bob")).pendingMessages).toBe(1);
      await broker.submit(message("alice", "bob"));
      await broker.submit(message("alice", "bob"));
      await expectBrokerError(broker.submit(message("alice", "bob")), "quota");
      // Acknowledging twice frees nothing twice.
      await broker.ack("bob", accepted[0] as SubmitInput);
      expect((await broker.usage("bob")).pendingMessages).toBe(3);
    });

    it("refuses past a recipient's pending bytes", async () => {
      const first = message("alice", "bob");
      const second = message("alice", "bob");
      const limit = bytesOf(first) + bytesOf(second) + 10;
      const broker = await ctx.open(await ctx.harness(), { quotas: { recipientPendingBytes: limit } });
      await broker.submit(first);
      await broker.submit(second);
      const refusal = await expectBrokerError(broker.submit(message("alice", "bob")), "quota");
      expect(refusal.quota).toEqual({
        quota: "recipient-pending-bytes",
        limit,
        used: bytesOf(first) + bytesOf(second),
      });
      const big = message("alice", "dave", { envelope: JSON.stringify({ pad: "x".repeat(limit) }) });
      await expectBrokerError(broker.submit(big), "quota");
    });

    it("refuses past a sender's stored bytes, acknowledged or not, until retention removes them", async () => {
      const sample = message("alice", "bob");
      const limit = bytesOf(sample) * 3;
      const broker = await ctx.open(await ctx.harness(), {
        quotas: { senderStoredBytes: limit },
        retentionMs: 1_500,
      });
      // The same sender, several recipients: what it stores counts wherever it went.
      const sent = [sample, message("alice", "carol"), message("alice", "dave")];
      for (const input of sent) await broker.submit(input);
      await broker.ack("bob", sample);
      const refusal = await expectBrokerError(broker.submit(message("alice", "erin")), "quota");
      expect(refusal.quota).toMatchObject({ quota: "sender-stored-bytes", limit });
      expect((await broker.usage("alice")).storedBytes).toBe(sent.map(bytesOf).reduce((a, b) => a + b, 0));
      // Others still send.
      await broker.submit(message("bob", "carol"));
      // Past retention nothing is stored or pending any more.
      await eventually(async () => {
        expect(await broker.usage("alice")).toEqual({ pendingMessages: 0, pendingBytes: 0, storedBytes: 0 });
        expect((await broker.usage("carol")).pendingMessages).toBe(0);
      }, 15_000);
      await broker.submit(message("alice", "erin"));
    });

    it("counts a dead-lettered message out of its recipient's pending", async () => {
      const broker = await ctx.open(await ctx.harness(), {
        quotas: { recipientPendingMessages: 10 },
        delivery: { ackWaitMs: 300, maxDeliver: 1 },
      });
      const doomed = message("alice", "bob");
      await broker.submit(doomed);
      const inbox = reader(await broker.openInbox("bob"));
      expect((await inbox.next()).id).toBe(doomed.id);
      await eventually(async () => {
        expect((await broker.status(doomed))?.status).toBe("failed");
        expect((await broker.usage("bob")).pendingMessages).toBe(0);
      });
    });

    it("keeps the usage across a restart", async () => {
      const harness = await ctx.harness();
      const quotas = { recipientPendingMessages: 2 };
      const first = await ctx.open(harness, { quotas });
      const kept = message("alice", "bob");
      await first.submit(kept);
      await first.submit(message("alice", "bob"));
      await first.ack("bob", kept);
      await first.close();
      const again = await ctx.open(harness, { quotas });
      expect((await again.usage("bob")).pendingMessages).toBe(1);
      await again.submit(message("alice", "bob"));
      await expectBrokerError(again.submit(message("alice", "bob")), "quota");
    });

    it("keeps no usage without quotas", async () => {
      const broker = await ctx.open(await ctx.harness());
      await broker.submit(message("alice", "bob"));
      expect(await broker.usage("bob")).toEqual({ pendingMessages: 0, pendingBytes: 0, storedBytes: 0 });
    });
  });
}
