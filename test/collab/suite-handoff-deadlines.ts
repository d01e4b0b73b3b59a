import { expect, it } from "vitest";
import { CollabClient, type CollabNotice } from "../../src/client/collab.js";
import type { HandoffView } from "../../src/collab/index.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { agentFor } from "../client/fixtures.js";
import { api } from "../helpers/gateway.js";
import { rejection } from "./suite-negotiation.js";
import {
  auditMethods,
  auditSummaries,
  type CollabBed,
  type GatewayFactory,
  until,
  useCollabBed,
} from "../helpers/collab-testbed.js";

const TASK = { completed: "drafted", remaining: "translate chapter 2", context: { words: 4200 } };
const HOUR = 3_600_000;

async function grant(bed: CollabBed, agentId: string, amount: number) {
  const r = await api(bed.gw.url, "/api/v1/ledger/grants", {
    headers: { authorization: `Bearer ${bed.gw.adminToken}` },
    body: { agentId, amount },
  });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
}

/** The handoff once the gateway moved it to `status`. */
const settledAs = (client: CollabClient, handoffId: string, status: string) =>
  until(
    () => client.handoffs.get(handoffId),
    (h: HandoffView) => h.status === status,
    `handoff ${handoffId} ${status}`,
  );

/** The `agent.handoff.expired` notices `client`'s agent received. */
function expiryNotices(client: CollabClient): CollabNotice[] {
  const notices: CollabNotice[] = [];
  client.on("handoff", (notice) => {
    if (notice.method === "agent.handoff.expired") notices.push(notice);
  });
  return notices;
}

/** Handoff deadlines through a real gateway: expiry of offers and tasks, and offers queued for offline delegates. */
export function handoffDeadlineSuite(makeGateway: GatewayFactory): void {
  const bed = useCollabBed(makeGateway, { handoff: { sweepMs: 50 } });

  it("an offer nobody answers expires at its respondBy: escrow refunded, both parties told, audited", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker");
    await grant(bed, "boss", 100);
    const [bossHears, workerHears] = [expiryNotices(boss.collab), expiryNotices(worker.collab)];
    const offered = await boss.collab.handoffs.offer("worker", TASK, { title: "Chapter 2", escrow: 30 });
    // The gateway's default: an offer lives 24 hours.
    expect(Date.parse(offered.respondBy) - Date.parse(offered.createdAt)).toBe(24 * HOUR);
    expect(offered.deadline).toBeUndefined();

    // An offer due two minutes earlier: the sweep that expires it and then tells both parties
    // (after every expiry of its pass) looked at the first offer too, a minute before its respondBy.
    const earlier = await boss.collab.handoffs.offer("worker", TASK, {
      respondBy: new Date(Date.parse(offered.respondBy) - 120_000).toISOString(),
    });
    bed.advance(24 * HOUR - 60_000);
    const toldOf = (handoffId: string) =>
      [...bossHears, ...workerHears].filter((notice) => notice.body.handoffId === handoffId);
    await until(
      () => toldOf(earlier.handoffId).length,
      (n) => n === 2,
      "both parties are told of the earlier offer",
    );
    expect((await boss.collab.handoffs.get(offered.handoffId)).status).toBe("offered");
    bed.advance(60_000);
    const expired = await settledAs(boss.collab, offered.handoffId, "expired");
    expect(expired).toMatchObject({
      escrowState: "refunded",
      expiry: { of: "offer", due: offered.respondBy },
      reason: `boss's offer of the task "Chapter 2" to worker was not answered by ${offered.respondBy}; 30 credits went back to boss`,
    });
    expect(expired.events.at(-1)).toMatchObject({ status: "expired", by: "gateway" });
    expect((await boss.collab.handoffs.balance()).balance).toBe(100);
    // Too late to accept now.
    expect((await rejection(worker.collab.handoffs.accept(offered.handoffId))).code).toBe(ErrorCode.Conflict);

    await until(
      () => toldOf(offered.handoffId).length,
      (n) => n === 2,
      "both parties are told",
    );
    for (const notice of toldOf(offered.handoffId)) {
      expect(notice.body).toEqual({
        handoffId: offered.handoffId,
        title: "Chapter 2",
        delegator: "boss",
        delegate: "worker",
        expired: "offer",
        due: offered.respondBy,
        refunded: 30,
      });
      expect(notice.context.principalId).toBe("acp-gateway-collab");
    }
    await until(
      () => boss.collab.handoffs.get(offered.handoffId),
      (h: HandoffView) => (h.toTell ?? []).length === 0,
      "nobody is left to tell",
    );
    await auditMethods(bed, "collab.handoff.expired");
    const summaries = await auditSummaries(bed, "collab.handoff.expired");
    expect(summaries).toHaveLength(2);
    expect(summaries).toContain(expired.reason);
    expect((await auditMethods(bed)).filter((m) => m === "collab.escrow.refund")).toHaveLength(1);
  });

  it("an accepted task not completed by its deadline expires and its held escrow goes back", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker");
    const [bossHears, workerHears] = [expiryNotices(boss.collab), expiryNotices(worker.collab)];
    await grant(bed, "boss", 50);
    const deadline = new Date(Date.now() + 2 * HOUR).toISOString();
    const offered = await boss.collab.handoffs.offer("worker", TASK, { escrow: 50, deadline });
    // Never open longer than the task it offers.
    expect(offered).toMatchObject({ respondBy: deadline, deadline });
    const accepted = await worker.collab.handoffs.accept(offered.handoffId);
    expect(accepted).toMatchObject({ status: "accepted", escrowState: "held", deadline });
    const plain = await boss.collab.handoffs.offer("worker", TASK);
    const acceptedPlain = await worker.collab.handoffs.accept(plain.handoffId);
    // Without a deadline in the offer, the gateway's: 7 days after the acceptance.
    expect(Date.parse(acceptedPlain.deadline as string) - Date.parse(acceptedPlain.updatedAt)).toBe(
      7 * 24 * HOUR,
    );

    bed.advance(2 * HOUR);
    const expired = await settledAs(boss.collab, offered.handoffId, "expired");
    expect(expired).toMatchObject({ escrowState: "refunded", expiry: { of: "task", due: deadline } });
    expect(expired.reason).toBe(
      `worker did not complete the task for boss by its deadline ${deadline}; 50 credits went back to boss`,
    );
    expect(await boss.collab.handoffs.balance()).toMatchObject({ balance: 50, escrowed: 0 });
    expect((await boss.collab.status("worker")).presence.tasks.map((t) => t.id)).toEqual([plain.handoffId]);
    expect((await boss.collab.handoffs.get(plain.handoffId)).status).toBe("accepted");
    await until(
      () => [...bossHears, ...workerHears].map((n) => n.body.expired),
      (told) => told.length === 2,
      "both parties are told",
    );
    expect(workerHears[0]?.body).toMatchObject({
      handoffId: offered.handoffId,
      expired: "task",
      refunded: 50,
    });
  });

  it("refuses a respondBy or deadline in the past, or a deadline before respondBy, naming the field", async () => {
    const boss = await bed.member("boss");
    await bed.member("worker");
    const soon = new Date(Date.now() + HOUR).toISOString();
    const later = new Date(Date.now() + 2 * HOUR).toISOString();
    for (const [task, path] of [
      [{ respondBy: new Date(Date.now() - 1000).toISOString() }, "/params/body/task/respondBy"],
      [{ deadline: "2020-01-01T00:00:00Z" }, "/params/body/task/deadline"],
      [{ respondBy: later, deadline: soon }, "/params/body/task/deadline"],
    ] as const) {
      const refused = await rejection(boss.collab.handoffs.offer("worker", TASK, task));
      expect(refused.code).toBe(ErrorCode.InvalidParams);
      expect(refused.data.problems?.[0]?.path).toBe(path);
    }
    expect(await boss.collab.handoffs.list()).toEqual([]);
  });

  it("refuses a handoff to an unknown agent at once, and queues one to an offline agent until it is online", async () => {
    const boss = await bed.member("boss");
    await grant(bed, "boss", 20);
    const unknown = await rejection(boss.collab.handoffs.offer("nobody-here", TASK));
    expect(unknown.code).toBe(ErrorCode.UnknownRecipient);
    expect(unknown.message).toBe("no agent nobody-here is registered at the gateway");

    const worker = await bed.gw.register("worker", "principal-worker");
    const queued = await boss.collab.handoffs.offer("worker", TASK, { title: "Chapter 2", escrow: 20 });
    expect(queued).toMatchObject({ status: "offered", delivery: "queued", escrowState: "reserved" });

    // The delegate comes online: the handshake completes, the gateway delivers the offer, it accepts.
    const agent = agentFor(bed.gw, worker, `${bed.dir}/worker`);
    bed.cleanups.push(() => agent.close());
    const collab = new CollabClient({ agent, identity: worker.identity, apiKey: worker.apiKey });
    const offers: string[] = [];
    collab.onHandoffOffer((offer) => {
      offers.push(offer.handoffId);
      return "accept";
    });
    await agent.connect();
    const accepted = await settledAs(boss.collab, queued.handoffId, "accepted");
    expect(accepted.delivery).toBeUndefined();
    expect(accepted.events.map((e) => e.status)).toEqual(["offered", "delivered", "accepted"]);
    expect(offers).toEqual([queued.handoffId]);
    expect(await auditSummaries(bed, "collab.handoff.delivered")).toEqual([
      `boss's offer of "Chapter 2" reached worker once their handshake was complete`,
    ]);
  });

  it("a queued offer the delegate never takes expires, and only the delegator is told", async () => {
    const boss = await bed.member("boss");
    await bed.gw.register("sleeper", "principal-sleeper");
    const bossHears = expiryNotices(boss.collab);
    const queued = await boss.collab.handoffs.offer("sleeper", TASK, {
      respondBy: new Date(Date.now() + HOUR).toISOString(),
    });
    expect(queued.delivery).toBe("queued");
    bed.advance(HOUR);
    const expired = await settledAs(boss.collab, queued.handoffId, "expired");
    expect(expired.delivery).toBeUndefined();
    await until(
      () => bossHears.length,
      (n) => n === 1,
      "the delegator is told",
    );
    await until(
      () => boss.collab.handoffs.get(queued.handoffId),
      (h: HandoffView) => (h.toTell ?? []).length === 0,
      "nobody is left to tell",
    );
  });
}
