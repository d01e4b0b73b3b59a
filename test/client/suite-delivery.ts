import { expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import { GatewayClient } from "../../src/client/index.js";
import { buildAnnounce, buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { agentFor, deferred, eventually, type GatewayFactory } from "./fixtures.js";
import { useTestbed } from "./testbed.js";

/**
 * The SDK's delivery guarantees against a real gateway: exactly-once to the application, the
 * offline queue, lost handshakes, gateway restarts, refused deliveries, replies-only consumers.
 */
export function deliverySuite(makeGateway: GatewayFactory): void {
  const t = useTestbed(makeGateway);

  it("the same envelope submitted twice reaches the handler once", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const calls: unknown[] = [];
    bob.onNotification((body) => {
      calls.push(body);
    });
    await alice.handshake("bob-assistant");
    // Signed by alice's key with the layers her agent declared in the handshake.
    const sender = { ...t.alpha.sender, layers: [0, 1] };
    const signed = signMessage(buildNotification(sender, "bob-assistant", { once: true }), t.alpha.signer);
    const http = new GatewayClient({ gateway: t.gw.url, apiKey: t.alpha.apiKey });
    const first = await http.submit(signed);
    const second = await http.submit(signed);
    expect(second).toMatchObject({ id: first.id, duplicate: true });
    await eventually(
      async () => (await t.statusOf(t.alpha, first.id)).status === "acknowledged",
      "acknowledged",
    );
    expect(calls).toEqual([{ once: true }]);
  });

  it("a redelivery while the handler still runs is not handed to the application again", async () => {
    // The handler's `working` notices keep its delivery from timing out: a gateway restart makes
    // the redelivery instead (given back on the way down, sent again when bob reconnects).
    const restart = await t.restartableGateway();
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const release = deferred();
    let calls = 0;
    bob.onRequest(async () => {
      calls++;
      await release.promise;
      return { ok: true };
    });
    await alice.handshake("bob-assistant");
    // Bob acknowledges the handshake messages once their records are on disk: wait for that, so the
    // request is the delivery the restart counts.
    const bobsView = new GatewayClient({ gateway: t.gw.url, apiKey: t.beta.apiKey });
    await eventually(
      async () => (await bobsView.listMessages({ status: "delivered" })).items.length === 0,
      "bob acknowledged the handshake",
    );
    const response = alice.request("bob-assistant", { action: "slow" }, { timeoutMs: 30_000 });
    await eventually(() => calls === 1, "the handler started");
    const requestId = (
      await new GatewayClient({ gateway: t.gw.url, apiKey: t.beta.apiKey }).listMessages({ kind: "request" })
    ).items[0]!.id;
    await restart();
    await eventually(
      async () => (await t.statusOf(t.beta, requestId, "alice-assistant")).retry_count >= 1,
      "the gateway redelivered",
    );
    release.resolve();
    await expect(response).resolves.toEqual({ ok: true });
    await eventually(
      async () => (await t.statusOf(t.beta, requestId, "alice-assistant")).status === "acknowledged",
      "acknowledged",
    );
    expect(calls).toBe(1);
  });

  it("a handler slower than the ack wait loses nothing: no redelivery, no dead letter, all acknowledged", async () => {
    // The case (10 s per message, 200 queued, 30 s ack wait) takes 2,000 s. Scaled: an ack
    // wait of 1 s, each handler 1.5 s (longer than it: only `working` keeps the message), and 12
    // messages behind 2 handlers (the last waits 9 s, nine ack waits). A second delivery would be
    // the last allowed one (maxDeliver 2), so any expiry shows as a retry or a dead letter.
    await t.replaceGateway({ delivery: { ackWaitMs: 1_000, maxDeliver: 2, backoffFactor: 1 } });
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta, { flow: { concurrency: 2, prefetch: 1 } });
    const handled: string[] = [];
    let received = 0;
    let mostInHand = 0;
    bob.on("message", (m) => {
      if (m.method === "agent.notification") mostInHand = Math.max(mostInHand, ++received - handled.length);
    });
    bob.onNotification(async (_body, ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      handled.push(ctx.messageId);
    });
    await alice.handshake("bob-assistant");
    const ids: string[] = [];
    for (let n = 0; n < 12; n++) ids.push((await alice.notify("bob-assistant", { n })).id);
    const sender = new GatewayClient({ gateway: t.gw.url, apiKey: t.alpha.apiKey });
    const seen = new Map<string, string>();
    // What the sender can read at any moment: never `failed`, in the end `acknowledged`, never retried.
    await eventually(
      async () => {
        // The deprecated filter names (`toAgentId`, `type`) still filter like `to` and `kind`.
        const page = await sender.listMessages({
          toAgentId: "bob-assistant",
          type: "notification",
          limit: 50,
        });
        for (const item of page.items) {
          if (seen.get(item.id) !== "failed") seen.set(item.id, item.status);
          expect(item.retry_count, `${item.id} was redelivered`).toBe(0);
        }
        return ids.every((id) => seen.get(id) === "acknowledged");
      },
      "every message acknowledged",
      60_000,
    );
    expect([...seen.values()].filter((status) => status === "failed")).toEqual([]);
    expect(handled.sort()).toEqual([...ids].sort());
    // The rest waited at the gateway: bob never held more than its handlers plus its prefetch.
    expect(mostInHand).toBeLessThanOrEqual(3);
    expect(bob.errors).toEqual([]);
  }, 90_000);

  it("an offline recipient gets its queue, in order, when it comes back (handshake kept)", async () => {
    const alice = await t.connected(t.alpha);
    const bobFirst = await t.connected(t.beta);
    await alice.handshake("bob-assistant");
    await eventually(() => bobFirst.handshakeState("alice-assistant") === "established", "bob established");
    await bobFirst.close();
    for (let n = 1; n <= 3; n++) await alice.notify("bob-assistant", { n });
    const answer = alice.request("bob-assistant", { action: "while-you-were-away" }, { timeoutMs: 20_000 });

    const bob = agentFor(t.gw, t.beta, t.dir);
    const got: unknown[] = [];
    bob.onNotification((body) => {
      got.push(body.n);
    });
    bob.onRequest((body) => ({ seen: body.action, notificationsBefore: got.length }));
    await bob.connect();
    t.cleanups.push(() => bob.close());
    expect(bob.handshakeState("alice-assistant")).toBe("established");
    await expect(answer).resolves.toEqual({ seen: "while-you-were-away", notificationsBefore: 3 });
    expect(got).toEqual([1, 2, 3]);
  });

  it("a peer that lost the handshake handshakes again before it answers: no -32004", async () => {
    const alice = await t.connected(t.alpha);
    const bobFirst = await t.connected(t.beta, { state: false });
    await alice.handshake("bob-assistant");
    await bobFirst.close();
    const bob = await t.connected(t.beta, { state: false });
    bob.onRequest(() => ({ fine: true }));
    await expect(alice.request("bob-assistant", { action: "x" })).resolves.toEqual({ fine: true });
    const refused: number[] = [];
    for await (const { entry } of readAudit({ root: `${t.dir}/audit`, agent: "bob-assistant" })) {
      if (entry.error) refused.push(entry.error.code);
    }
    expect(refused).not.toContain(ErrorCode.HandshakeRequired);
  });

  it("a pending request survives a gateway restart; both agents reconnect", async () => {
    const restart = await t.restartableGateway();
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const events: string[] = [];
    alice.on("disconnected", () => events.push("disconnected"));
    alice.on("connected", (info) => events.push(info.reconnected ? "reconnected" : "connected"));
    const release = deferred();
    let started = false;
    bob.onRequest(async () => {
      started = true;
      await release.promise;
      return { after: "restart" };
    });
    const response = alice.request("bob-assistant", { action: "slow" }, { timeoutMs: 30_000 });
    await eventually(() => started, "bob's handler started");
    await t.gw.close();
    await eventually(() => !alice.connected && !bob.connected, "both saw the gateway go");
    release.resolve();
    await restart();
    await expect(response).resolves.toEqual({ after: "restart" });
    expect(events).toEqual(["disconnected", "reconnected"]);
  });

  it("refuses, and dead-letters, a queued message from an agent revoked since it was sent", async () => {
    const alice = await t.connected(t.alpha);
    const bobFirst = await t.connected(t.beta);
    await alice.handshake("bob-assistant");
    await bobFirst.close();
    const { id } = await alice.notify("bob-assistant", { from: "before the revocation" });
    await new GatewayClient({ gateway: t.gw.url, adminToken: t.gw.adminToken }).revokeAgent(
      "alice-assistant",
    );
    const got: unknown[] = [];
    const bob = await t.connected(t.beta);
    bob.onNotification((body) => {
      got.push(body);
    });
    await eventually(
      async () => (await t.statusOf(t.beta, id, "alice-assistant")).status === "failed",
      "the message failed",
    );
    expect(await t.statusOf(t.beta, id, "alice-assistant")).toMatchObject({
      dead_letter: { reason: "rejected" },
    });
    expect(bob.errors.map((e) => e.message).join("\n")).toContain(`refused ${id} from alice-assistant`);
    expect(got).toEqual([]);
    expect(bob.handshakeState("alice-assistant")).toBe("none");
  });

  it("consume: replies takes only its own answers; the rest waits, untouched, for the agent's real consumer", async () => {
    const alice = await t.connected(t.alpha);
    alice.onRequest(() => ({ answered: true }));
    const bobSender = await t.connected(t.beta, { consume: "replies" });
    const seenBySender: string[] = [];
    bobSender.on("message", (m) => seenBySender.push(m.messageId));
    // Its own handshake and request: alice's replies come back to this socket.
    await bobSender.handshake("alice-assistant");
    await expect(bobSender.request("alice-assistant", { q: 1 })).resolves.toEqual({ answered: true });
    const { id } = await alice.notify("bob-assistant", { n: 1 });
    expect((await t.statusOf(t.beta, id, "alice-assistant")).status).toBe("queued");
    await bobSender.close();
    const got: unknown[] = [];
    const bob = agentFor(t.gw, t.beta, t.dir);
    bob.onNotification((body) => {
      got.push(body);
    });
    await bob.connect();
    t.cleanups.push(() => bob.close());
    await eventually(() => got.length === 1, "the real consumer got it");
    expect(got).toEqual([{ n: 1 }]);
    expect(seenBySender).not.toContain(id);
    await eventually(
      async () => (await t.statusOf(t.beta, id, "alice-assistant")).status === "acknowledged",
      "acknowledged",
    );
    expect((await t.statusOf(t.beta, id, "alice-assistant")).retry_count).toBe(0);
  });

  it("a handshake with an offline peer times out, and completes once the peer comes online", async () => {
    const alice = await t.connected(t.alpha);
    await expect(alice.handshake("bob-assistant", { timeoutMs: 300 })).rejects.toMatchObject({
      code: ErrorCode.Timeout,
      data: { peer: "bob-assistant", state: "announcing" },
    });
    const bob = await t.connected(t.beta);
    bob.onRequest(() => ({ late: "but fine" }));
    await eventually(() => alice.handshakeState("bob-assistant") === "established", "alice established");
    await expect(alice.request("bob-assistant", {})).resolves.toEqual({ late: "but fine" });
  });

  it("an extra announce does not make two agents re-announce to each other forever", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onRequest(() => ({ still: "talking" }));
    const bobReceived = new Set<string>();
    bob.on("message", (m) => bobReceived.add(m.messageId));
    await alice.handshake("bob-assistant");
    // A second announce of alice's, e.g. from another process with her key, restarts bob's handshake.
    const sender = { ...t.alpha.sender, layers: [0, 1] };
    const announce = buildAnnounce(sender, "bob-assistant", { capabilities: [], purpose: "again" });
    const { id } = await new GatewayClient({ gateway: t.gw.url, apiKey: t.alpha.apiKey }).submit(
      signMessage(announce, t.alpha.signer),
    );
    // Until bob has it, "both established" is still the state from before the extra announce.
    await eventually(() => bobReceived.has(id), "bob received the extra announce");
    await eventually(
      () =>
        alice.handshakeState("bob-assistant") === "established" &&
        bob.handshakeState("alice-assistant") === "established",
      "both established again",
    );
    await expect(alice.request("bob-assistant", {})).resolves.toEqual({ still: "talking" });
    // Reply announces are never answered with another announce, so the SDK's storm guard never fired.
    expect([...alice.errors, ...bob.errors].filter((e) => /announced \d+ times/.test(e.message))).toEqual([]);
  });
}
