import { expect, it } from "vitest";
import { HandoffClient } from "../../src/client/collab.js";
import { CollabCore } from "../../src/client/collab-core.js";
import type { HandoffView } from "../../src/collab/index.js";
import { pendingHandoffs, watchPendingHandoffs } from "../../src/extensions/collab/handoff-store.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { api } from "../helpers/gateway.js";
import { rejection } from "./suite-negotiation.js";
import {
  auditMethods,
  type CollabBed,
  type GatewayFactory,
  type Member,
  until,
  useCollabBed,
} from "../helpers/collab-testbed.js";

const TASK = {
  completed: ["read the brief"],
  remaining: ["translate chapter 2 into French"],
  context: { source: "https://example.org/ch2", words: 4200 },
};

async function grant(bed: CollabBed, agentId: string, amount: number) {
  const r = await api(bed.gw.url, "/api/v1/ledger/grants", {
    headers: { authorization: `Bearer ${bed.gw.adminToken}` },
    body: { agentId, amount, note: "test budget" },
  });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
}

async function balances(delegator: Member, delegate: Member) {
  const [a, b] = await Promise.all([delegator.collab.handoffs.balance(), delegate.collab.handoffs.balance()]);
  return { delegator: a.balance, escrowed: a.escrowed, delegate: b.balance, incoming: b.incoming };
}

/** Task handoffs through a real gateway: lifecycle, escrow at each step, capability checks. */
export function handoffSuite(makeGateway: GatewayFactory): void {
  const bed = useCollabBed(makeGateway);

  it("offer → accept → complete moves the escrow reserved → held → released, every movement audited", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["translate"]);
    await grant(bed, "boss", 100);
    const heard: string[] = [];
    boss.collab.on("handoff", (n) => heard.push(n.method));

    const offered = await boss.collab.handoffs.offer("worker", TASK, {
      title: "Chapter 2",
      requires: ["translate"],
      escrow: 40,
    });
    expect(offered).toMatchObject({
      status: "offered",
      escrow: 40,
      escrowState: "reserved",
      delegate: "worker",
    });
    expect(await balances(boss, worker)).toEqual({ delegator: 60, escrowed: 40, delegate: 0, incoming: 0 });
    expect((await pendingHandoffs(bed.gw.gateway.broker, "worker")).map((h) => h.status)).toEqual([
      "offered",
    ]);

    const accepted = await worker.collab.handoffs.accept(offered.handoffId);
    expect(accepted).toMatchObject({ status: "accepted", escrowState: "held" });
    expect(await balances(boss, worker)).toEqual({ delegator: 60, escrowed: 40, delegate: 0, incoming: 40 });

    await worker.collab.handoffs.progress(offered.handoffId, 50, "half way");
    const status = await boss.collab.status("worker");
    expect(status.presence.tasks).toEqual([{ id: offered.handoffId, title: "Chapter 2", progress: 50 }]);

    const completed = await worker.collab.handoffs.complete(offered.handoffId, {
      url: "https://example.org/ch2.fr",
    });
    expect(completed).toMatchObject({
      status: "completed",
      escrowState: "released",
      result: { url: "https://example.org/ch2.fr" },
    });
    expect(await balances(boss, worker)).toEqual({ delegator: 60, escrowed: 0, delegate: 40, incoming: 0 });
    expect((await boss.collab.status("worker")).presence.tasks).toEqual([]);
    expect(await pendingHandoffs(bed.gw.gateway.broker, "worker")).toEqual([]);

    await until(
      () => heard,
      (h) => h.length === 3,
      "the delegator hears accept, progress and complete",
    );
    expect(heard).toEqual(["agent.handoff.accept", "agent.handoff.progress", "agent.handoff.complete"]);
    const movements = (await worker.collab.handoffs.balance()).movements.map((m) => [
      m.kind,
      m.amount,
      m.balances,
    ]);
    expect(movements).toEqual([
      ["reserve", 40, { boss: 60 }],
      ["hold", 40, { boss: 60 }],
      ["release", 40, { worker: 40 }],
    ]);
    const methods = await auditMethods(bed, "collab.escrow.release");
    expect(methods.filter((m) => m.startsWith("collab."))).toEqual([
      "collab.ledger.grant",
      "collab.escrow.reserve",
      "collab.escrow.hold",
      "collab.escrow.release",
    ]);
  });

  it("refunds the escrow on decline, on failure and on cancel, and refuses illegal transitions", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["translate"]);
    await grant(bed, "boss", 100);
    const offer = (escrow: number) =>
      boss.collab.handoffs.offer("worker", TASK, { requires: ["translate"], escrow });

    const declined = await offer(30);
    expect(await balances(boss, worker)).toMatchObject({ delegator: 70, escrowed: 30 });
    expect(await worker.collab.handoffs.decline(declined.handoffId, "busy this week")).toMatchObject({
      status: "declined",
      reason: "busy this week",
      escrowState: "refunded",
    });
    expect(await balances(boss, worker)).toEqual({ delegator: 100, escrowed: 0, delegate: 0, incoming: 0 });

    const failed = await offer(50);
    await worker.collab.handoffs.accept(failed.handoffId);
    expect(await balances(boss, worker)).toEqual({ delegator: 50, escrowed: 50, delegate: 0, incoming: 50 });
    expect(await worker.collab.handoffs.fail(failed.handoffId, "source unreadable")).toMatchObject({
      status: "failed",
      escrowState: "refunded",
    });
    expect(await balances(boss, worker)).toEqual({ delegator: 100, escrowed: 0, delegate: 0, incoming: 0 });

    const cancelled = await offer(100);
    expect(await balances(boss, worker)).toMatchObject({ delegator: 0, escrowed: 100 });
    const tooMuch = await rejection(offer(1));
    expect(tooMuch.code).toBe(ErrorCode.Conflict);
    expect(tooMuch.message).toMatch(/boss has 0 credits; the escrow needs 1/);
    const notYours = await rejection(worker.collab.handoffs.cancel(cancelled.handoffId));
    expect(notYours.code).toBe(ErrorCode.Forbidden);
    expect(notYours.message).toMatch(/only the delegator may cancel/);
    expect(await boss.collab.handoffs.cancel(cancelled.handoffId)).toMatchObject({
      status: "cancelled",
      escrowState: "refunded",
    });
    expect(await balances(boss, worker)).toEqual({ delegator: 100, escrowed: 0, delegate: 0, incoming: 0 });

    // Terminal states take nothing more; complete needs an accepted handoff.
    const late = await rejection(worker.collab.handoffs.accept(cancelled.handoffId));
    expect(late.code).toBe(ErrorCode.Conflict);
    expect(late.message).toMatch(
      /cannot accept handoff .*: it is cancelled, and accept is allowed only when offered/,
    );
    const early = await offer(0);
    const premature = await rejection(worker.collab.handoffs.complete(early.handoffId));
    expect(premature.message).toMatch(/it is offered, and complete is allowed only when accepted/);
    const boss2 = await rejection(boss.collab.handoffs.complete(early.handoffId));
    expect(boss2.code).toBe(ErrorCode.Forbidden);
  });

  it("refuses a handoff to an agent without the required capability before anything is reserved or delivered", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["summarize"]);
    await grant(bed, "boss", 10);
    const refused = await rejection(
      boss.collab.handoffs.offer("worker", TASK, { requires: ["summarize", "translate"], escrow: 10 }),
    );
    expect(refused.code).toBe(ErrorCode.CapabilityMissing);
    expect(refused.message).toBe("worker did not register the capability translate this handoff requires");
    expect(refused.data.missing).toEqual(["translate"]);
    expect(refused.data.problems).toEqual([
      { path: "/params/body/task/requires/1", message: "worker does not offer translate" },
    ]);
    expect(await balances(boss, worker)).toMatchObject({ delegator: 10, escrowed: 0 });
    expect(await boss.collab.handoffs.list()).toEqual([]);
    // Nothing was submitted to the worker: the refusal came before the relay.
    const sent = await api(bed.gw.url, "/api/v1/messages?to_agent_id=worker&type=handoff", {
      apiKey: boss.test.apiKey,
    });
    expect(sent.json.items).toEqual([]);
  });

  it("the delegate decides in its onOffer handler; the delegator's pending-handoff hook fires", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["translate"]);
    const offers: string[] = [];
    worker.collab.onHandoffOffer((offer) => {
      offers.push(`${offer.from}:${offer.task.title}:${String(offer.handoff.remaining)}`);
      return offer.task.title === "ok" ? "accept" : { decline: "not my kind of task" };
    });
    const changes: string[] = [];
    const stop = await watchPendingHandoffs(bed.gw.gateway.broker, "worker", (h) => changes.push(h.status));
    try {
      const yes = await boss.collab.handoffs.offer("worker", TASK, { title: "ok" });
      const no = await boss.collab.handoffs.offer("worker", TASK, { title: "meh" });
      const settled = async (id: string) =>
        until(
          () => boss.collab.handoffs.get(id),
          (h: HandoffView) => h.status !== "offered",
          `${id} decided`,
        );
      expect((await settled(yes.handoffId)).status).toBe("accepted");
      expect(await settled(no.handoffId)).toMatchObject({
        status: "declined",
        reason: "not my kind of task",
      });
      expect(offers).toEqual([
        "boss:ok:translate chapter 2 into French",
        "boss:meh:translate chapter 2 into French",
      ]);
      await until(
        () => changes,
        (c) => c.includes("accepted") && c.includes("declined"),
        "the hook saw both decisions",
      );
    } finally {
      stop();
    }
  });

  it("refunds the reservation when the offer cannot be delivered (the relay refuses it)", async () => {
    const boss = await bed.offline("lonely-boss");
    // Online, so the offer is not queued for it: the relay's refusal (no handshake) stands.
    await bed.member("lonely-worker");
    await grant(bed, "lonely-boss", 25);
    const core = new CollabCore({
      gateway: bed.gw.url,
      identity: boss.test.identity,
      apiKey: boss.test.apiKey,
    });
    core.reach = async () => undefined;
    const refused = await rejection(new HandoffClient(core).offer("lonely-worker", TASK, { escrow: 25 }));
    expect(refused.code).toBe(ErrorCode.HandshakeRequired);
    const account = await boss.collab.handoffs.balance();
    expect(account).toMatchObject({ balance: 25, escrowed: 0 });
    expect(account.movements.map((m) => m.kind)).toEqual(["grant", "reserve", "refund"]);
    expect(await boss.collab.handoffs.list()).toEqual([]);
  });
}
