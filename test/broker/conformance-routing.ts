import { describe, expect, it } from "vitest";
import type { SuiteContext } from "./conformance.js";
import {
  deliveredBefore,
  eventually,
  exchange,
  expectBrokerError,
  message,
  reader,
  routedTo,
} from "./support.js";

/** Several consumers of one agent: give back one consumer's hand-outs; answers routed to a socket. */
export function routingConformance(ctx: SuiteContext): void {
  describe("several consumers of one agent", () => {
    it("routes an answer to its request's reply route, ahead of the queue and outside maxInFlight", async () => {
      const broker = await ctx.open(await ctx.harness());
      const route = `${broker.instanceId}/socket-1`;
      const { got } = routedTo(broker, "alice");
      const queued = [message("carol", "alice"), message("carol", "alice")];
      for (const input of queued) await broker.submit(input);
      const inbox = reader(await broker.openInbox("alice", { maxInFlight: 1 }));
      expect((await inbox.next()).id).toBe(queued[0]!.id); // the queue's only slot, not acknowledged
      const { answer } = await exchange(broker, route);
      await eventually(async () => expect(got.map((d) => d.id)).toEqual([answer.id]));
      expect(got[0]).toMatchObject({ route, attempt: 1, envelope: answer.envelope, from: "bob" });
      expect(await broker.status(answer)).toMatchObject({ status: "delivered" });
      await broker.working("alice", answer);
      await broker.ack("alice", answer);
      expect(await broker.status(answer)).toMatchObject({ status: "acknowledged", retryCount: 0 });
      await broker.ack("alice", queued[0]!);
      expect((await inbox.next()).id).toBe(queued[1]!.id);
      await broker.ack("alice", queued[1]!);
      expect(await deliveredBefore(broker, inbox, "alice")).toEqual([]);
    });

    it("routes notifications about a request there too, and still the answer after them", async () => {
      const broker = await ctx.open(await ctx.harness());
      const { got } = routedTo(broker, "alice");
      const request = message("alice", "bob", { kind: "request", method: "agent.request" });
      await broker.submit({ ...request, replyTo: `${broker.instanceId}/socket-1` });
      const progress = message("bob", "alice", { method: "agent.a2a.status", inReplyTo: request.id });
      await broker.submit(progress);
      const answer = message("bob", "alice", { kind: "response", method: "response", inReplyTo: request.id });
      await broker.submit(answer);
      await eventually(async () =>
        expect(got.map((d) => d.id).sort()).toEqual([progress.id, answer.id].sort()),
      );
      for (const delivery of got) await broker.ack("alice", delivery);
      const inbox = reader(await broker.openInbox("alice"));
      expect(await deliveredBefore(broker, inbox, "alice")).toEqual([]);
    });

    it("routes only an answer from the asked agent: another's goes to the queue", async () => {
      const broker = await ctx.open(await ctx.harness());
      const { got } = routedTo(broker, "alice");
      const request = message("alice", "bob", { kind: "request", method: "agent.request" });
      await broker.submit({ ...request, replyTo: `${broker.instanceId}/socket-1` });
      const forged = message("carol", "alice", {
        kind: "response",
        method: "response",
        inReplyTo: request.id,
      });
      await broker.submit(forged);
      const inbox = reader(await broker.openInbox("alice"));
      expect((await inbox.next()).id).toBe(forged.id);
      expect(got).toEqual([]);
    });

    it("delivers an answer like any other when its route has no receiver here", async () => {
      const broker = await ctx.open(await ctx.harness());
      const inbox = reader(await broker.openInbox("alice"));
      const { answer } = await exchange(broker, `${broker.instanceId}/gone`);
      expect(await inbox.next()).toMatchObject({ id: answer.id, attempt: 1 });
      await broker.ack("alice", answer);
    });

    it("a routed delivery given back goes to the queue uncounted; one whose ack wait ends, counted", async () => {
      const broker = await ctx.open(await ctx.harness(), { delivery: { ackWaitMs: 300, maxDeliver: 5 } });
      const { got, receiver } = routedTo(broker, "alice");
      const inbox = reader(await broker.openInbox("alice"));
      const first = await exchange(broker, `${broker.instanceId}/socket-1`);
      await eventually(async () => expect(got).toHaveLength(1));
      await receiver.giveBack([first.answer]);
      expect(await inbox.next()).toMatchObject({ id: first.answer.id, attempt: 1 });
      await broker.ack("alice", first.answer);
      const second = await exchange(broker, `${broker.instanceId}/socket-1`);
      await eventually(async () => expect(got).toHaveLength(2));
      // Not acknowledged: its ack wait (300 ms) ends and the queue delivers it again.
      expect(await inbox.next()).toMatchObject({ id: second.answer.id, attempt: 2 });
      await broker.ack("alice", second.answer);
      expect(await broker.status(second.answer)).toMatchObject({ status: "acknowledged", retryCount: 1 });
      await receiver.close();
    });

    it("routed deliveries given back together go to a consumer already waiting oldest first, in whatever order they come back", async () => {
      const broker = await ctx.open(await ctx.harness());
      const { got, receiver } = routedTo(broker, "alice");
      const inbox = reader(await broker.openInbox("alice"));
      const route = `${broker.instanceId}/socket-1`;
      const older = (await exchange(broker, route)).answer;
      const newer = (await exchange(broker, route)).answer;
      await eventually(async () => expect(got).toHaveLength(2));
      const next = inbox.next(); // asked before they come back
      await receiver.giveBack([newer, older]);
      expect([await next, await inbox.next()]).toMatchObject([
        { id: older.id, attempt: 1 },
        { id: newer.id, attempt: 1 },
      ]);
    });

    it("gives one consumer's hand-outs back while the inbox stays open: the oldest counted", async () => {
      const broker = await ctx.open(await ctx.harness());
      const inputs = [message("carol", "alice"), message("carol", "alice"), message("carol", "alice")];
      for (const input of inputs) await broker.submit(input);
      const opened = await broker.openInbox("alice");
      const inbox = reader(opened);
      for (const input of inputs) expect((await inbox.next()).id).toBe(input.id);
      await broker.ack("alice", inputs[0]!);
      await opened.giveBack([inputs[1]!, inputs[2]!, { from: "carol", id: "not-handed-out-here" }]);
      expect(await inbox.next()).toMatchObject({ id: inputs[1]!.id, attempt: 2 });
      expect(await inbox.next()).toMatchObject({ id: inputs[2]!.id, attempt: 1 });
    });

    it("takes one routed receiver per agent, and refuses a malformed route", async () => {
      const broker = await ctx.open(await ctx.harness());
      const { receiver } = routedTo(broker, "alice");
      expect(() => broker.receiveRouted("alice", () => undefined)).toThrow(/already/);
      await receiver.close();
      routedTo(broker, "alice");
      await expectBrokerError(
        broker.submit({ ...message("bob", "alice"), route: "no-slash" }),
        "invalid_argument",
        "route",
      );
      await expectBrokerError(
        broker.submit({ ...message("bob", "alice"), replyTo: "a/b/c" }),
        "invalid_argument",
        "replyTo",
      );
    });
  });
}
