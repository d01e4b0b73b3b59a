import { expect, it, vi } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { eventually, type GatewayFactory } from "./fixtures.js";
import { useTestbed } from "./testbed.js";

/**
 * A recipient that lost its handshake records (another directory, another machine, `state: false`)
 * re-establishes the handshake — from the gateway's copy of the sender's side, else afresh with the
 * sender — and then processes what was queued for it: nothing is refused or dead-lettered for the
 * recipient's own missing state, whether the sender is online, offline, comes back later, or never
 * answers a fresh handshake (then, after `handshakeWaitMs`, a refusal naming it).
 */
export function lostStateSuite(makeGateway: GatewayFactory): void {
  const t = useTestbed(makeGateway);

  /** Alice and bob complete a handshake; bob then goes away, and comes back without its record. */
  async function bobForgets(options: { aliceStays: boolean }) {
    const alice = await t.connected(t.alpha);
    const bobBefore = await t.connected(t.beta, { state: false });
    await alice.handshake("bob-assistant");
    await bobBefore.close();
    if (!options.aliceStays) await alice.close();
    return alice;
  }

  async function refusalsInBobsAudit(): Promise<number[]> {
    const codes: number[] = [];
    for await (const { entry } of readAudit({ root: `${t.dir}/audit`, agent: "bob-assistant" })) {
      if (entry.error) codes.push(entry.error.code);
    }
    return codes;
  }

  it("handshakes again with an online sender, then handles the queue in order: nothing refused", async () => {
    const alice = await bobForgets({ aliceStays: true });
    for (let n = 1; n <= 3; n++) await alice.notify("bob-assistant", { n });
    const answer = alice.request("bob-assistant", { action: "after-the-notes" });

    const bob = await t.connected(t.beta, { state: false });
    const got: unknown[] = [];
    bob.onNotification((body) => {
      got.push(body.n);
    });
    bob.onRequest((body) => ({ seen: body.action, notesBefore: got.length }));
    await expect(answer).resolves.toEqual({ seen: "after-the-notes", notesBefore: 3 });
    expect(got).toEqual([1, 2, 3]);
    expect(bob.handshakeState("alice-assistant")).toBe("established");
    expect(await refusalsInBobsAudit()).not.toContain(ErrorCode.HandshakeRequired);
    expect(bob.errors).toEqual([]);
  });

  it("the sender offline: the gateway's copy of its side re-establishes the handshake at once", async () => {
    const aliceBefore = await bobForgets({ aliceStays: true });
    const { id } = await aliceBefore.notify("bob-assistant", { pay: "invoice 6" });
    await aliceBefore.close();

    const paid: unknown[] = [];
    const bob = await t.connected(t.beta, { state: false });
    bob.onNotification((body) => {
      paid.push(body.pay);
    });
    await eventually(() => paid.length === 1, "handled without alice");
    expect(paid).toEqual(["invoice 6"]);
    expect(bob.handshakeState("alice-assistant")).toBe("established");
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
  });

  it("the gateway in trouble when asked for its copy: asked again, not a fresh handshake the offline sender cannot answer", async () => {
    const aliceBefore = await bobForgets({ aliceStays: true });
    const { id } = await aliceBefore.notify("bob-assistant", { pay: "invoice 7" });
    await aliceBefore.close();

    // The fault: the gateway answers the first two requests for its copy 503, as during a NATS
    // election (a fault the gateway cannot be made to show at just this request).
    const realFetch = globalThis.fetch;
    let refused = 0;
    const spy = vi.spyOn(globalThis, "fetch").mockImplementation((input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.endsWith("/api/v1/handshakes/alice-assistant") && refused < 2) {
        refused++;
        const error = { code: -32018, message: "NATS: TimeoutError" };
        return Promise.resolve(new Response(JSON.stringify({ error }), { status: 503 }));
      }
      return realFetch(input, init);
    });
    try {
      const paid: unknown[] = [];
      const bob = await t.connected(t.beta, { state: false });
      bob.onNotification((body) => {
        paid.push(body.pay);
      });
      await eventually(() => paid.length === 1, "handled without alice");
      expect(refused).toBe(2);
      expect(bob.handshakeState("alice-assistant")).toBe("established");
      await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
    } finally {
      spy.mockRestore();
    }
  });

  it("a queue longer than the agent's window is handled too, in order", async () => {
    const aliceBefore = await bobForgets({ aliceStays: true });
    for (let n = 1; n <= 8; n++) await aliceBefore.notify("bob-assistant", { n });
    await aliceBefore.close();
    const bob = await t.connected(t.beta, { state: false, flow: { concurrency: 1, prefetch: 1 } });
    const got: unknown[] = [];
    bob.onNotification((body) => {
      got.push(body.n);
    });
    await eventually(() => got.length === 8, "all eight handled");
    expect(got).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  /** The gateway has no copy of alice's side (kept only since the gateway keeps them). */
  const forgetAlicesProof = () =>
    t.gw.gateway.broker.kv("handshake-proofs").delete("alice-assistant.bob-assistant");

  it("no copy at the gateway: a fresh handshake, which an offline sender answers when it comes back", async () => {
    const aliceBefore = await bobForgets({ aliceStays: true });
    const { id } = await aliceBefore.notify("bob-assistant", { pay: "invoice 7" });
    await aliceBefore.close();
    await forgetAlicesProof();

    const bob = await t.connected(t.beta, { state: false });
    const paid: unknown[] = [];
    bob.onNotification((body) => {
      paid.push(body.pay);
    });
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "delivered", "delivered to bob");
    await eventually(() => bob.handshakeState("alice-assistant") === "announcing", "bob announced");
    expect(paid).toEqual([]); // held: bob's announce waits at the gateway for alice

    await t.connected(t.alpha); // alice's next session answers bob's announce
    await eventually(() => paid.length === 1, "handled once alice answered");
    expect(paid).toEqual(["invoice 7"]);
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
    expect((await t.statusOf(t.alpha, id)).dead_letter).toBeUndefined();
  });

  it("no copy and a sender that never answers: after handshakeWaitMs the message is refused, naming it", async () => {
    const aliceBefore = await bobForgets({ aliceStays: true });
    const { id } = await aliceBefore.notify("bob-assistant", { pay: "invoice 8" });
    await aliceBefore.close();
    await forgetAlicesProof();

    const bob = await t.connected(t.beta, { state: false, handshakeWaitMs: 400 });
    let runs = 0;
    bob.onNotification(() => {
      runs++;
    });
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "failed", "failed");
    const status = await t.statusOf(t.alpha, id);
    expect(status.dead_letter?.detail).toContain(
      "had no handshake with alice-assistant and alice-assistant did not complete a new one within 400 ms",
    );
    expect(runs).toBe(0);
    expect(bob.errors.map((e) => e.message).join("\n")).toContain("did not complete a new one");
  });

  it("an agent closed while it waits gives the message back: its next session handles it", async () => {
    const aliceBefore = await bobForgets({ aliceStays: true });
    const { id } = await aliceBefore.notify("bob-assistant", { pay: "invoice 9" });
    await aliceBefore.close();
    await forgetAlicesProof();
    const bobWaiting = await t.connected(t.beta, { state: false });
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "delivered", "delivered to bob");
    await bobWaiting.close();

    await t.connected(t.alpha);
    const bob = await t.connected(t.beta, { state: false });
    const paid: unknown[] = [];
    bob.onNotification((body) => {
      paid.push(body.pay);
    });
    await eventually(() => paid.length === 1, "handled by the next session");
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
  });
}
