import { afterEach, describe, expect, it } from "vitest";
import { type Broker, openBroker } from "../../src/broker/index.js";
import {
  type ApprovalStore,
  KvApprovalStore,
  Orchestrator,
  SqliteApprovalStore,
} from "../../src/orchestration/index.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-approvals-");
const command = new Orchestrator({ id: "orchestrator", audit: false }).command({
  to: "deployer",
  action: "EXECUTE",
  priority: "critical",
});
const request = (timeoutMs = 60_000) => ({
  command,
  fallbacks: ["deployer-2"],
  reason: "test",
  requestedBy: "orchestrator",
  principal: "alice",
  timeoutMs,
});

/** The rules every store keeps, run against each. */
function storeSuite(open: () => Promise<{ store: ApprovalStore; reopen: () => Promise<ApprovalStore> }>) {
  it("creates, lists, decides once, and a waiter sees the decision", async () => {
    const { store } = await open();
    const created = await store.create(request());
    expect(created).toMatchObject({
      status: "pending",
      command,
      fallbacks: ["deployer-2"],
      principal: "alice",
    });
    expect((await store.list({ status: "pending" })).map((r) => r.id)).toEqual([created.id]);
    expect(await store.list({ requestedBy: "someone-else" })).toEqual([]);
    const waiting = store.waitForDecision(created.id);
    const decided = await store.decide(created.id, { decision: "denied", by: "alice", note: "no" });
    expect(decided).toMatchObject({ status: "denied", decidedBy: "alice", note: "no" });
    expect(await waiting).toMatchObject({ status: "denied" });
    await expect(store.decide(created.id, { decision: "approved", by: "bob" })).rejects.toThrow(
      `approval ${created.id} is already denied`,
    );
    await expect(store.decide("no-such-approval", { decision: "approved", by: "bob" })).rejects.toThrow(
      "no approval no-such-approval",
    );
    expect(await store.get("no-such-approval")).toBeNull();
  });

  it("an approval past its expiry reads as expired and cannot be decided", async () => {
    const { store } = await open();
    const created = await store.create(request(1_000));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await expect(store.decide(created.id, { decision: "approved", by: "alice" })).rejects.toThrow(
      `approval ${created.id} expired at ${created.expiresAt}`,
    );
    expect((await store.get(created.id))?.status).toBe("expired");
    expect(await store.waitForDecision(created.id)).toMatchObject({
      status: "expired",
      decidedBy: "timeout",
    });
  });

  it("a pending approval survives reopening the store", async () => {
    const { store, reopen } = await open();
    const created = await store.create(request());
    const again = await reopen();
    expect((await again.get(created.id))?.status).toBe("pending");
    expect((await again.decide(created.id, { decision: "approved", by: "alice" })).status).toBe("approved");
  });

  it("of two racing decisions exactly one wins", async () => {
    const { store } = await open();
    const created = await store.create(request());
    const outcomes = await Promise.allSettled([
      store.decide(created.id, { decision: "approved", by: "alice" }),
      store.decide(created.id, { decision: "denied", by: "bob" }),
    ]);
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === "rejected")).toHaveLength(1);
  });
}

const closers: (() => Promise<void>)[] = [];
const closeAll = async () => {
  for (const close of closers.splice(0).reverse()) await close();
};
afterEach(closeAll);

describe("SqliteApprovalStore", () => {
  storeSuite(async () => {
    const file = `${tmp()}/approvals.db`;
    const openOne = () => {
      const store = SqliteApprovalStore.open(file, { pollMs: 20 });
      closers.push(() => store.close());
      return store;
    };
    return { store: openOne(), reopen: async () => openOne() };
  });
});

describe("KvApprovalStore on the embedded broker", () => {
  storeSuite(async () => {
    const data = tmp();
    let broker: Broker = await openBroker({ data });
    const store = new KvApprovalStore(broker);
    closers.push(async () => {
      await store.close();
      await broker.close();
    });
    return {
      store,
      reopen: async () => {
        await store.close();
        await broker.close();
        broker = await openBroker({ data });
        const again = new KvApprovalStore(broker);
        closers.push(async () => {
          await again.close();
          await broker.close();
        });
        return again;
      },
    };
  });
});

describeWithNats("KvApprovalStore on NATS JetStream", () => {
  const nats = useNatsServer();
  // Declared after useNatsServer, so it runs first: brokers close before their server is stopped.
  afterEach(closeAll);
  storeSuite(async () => {
    const server = await nats();
    const brokers: Broker[] = [await openBroker({ nats: { servers: server.url } })];
    const store = new KvApprovalStore(brokers[0]!);
    closers.push(async () => {
      await store.close();
      for (const broker of brokers) await broker.close();
    });
    return {
      store,
      // Another gateway on the same NATS sees the same approvals.
      reopen: async () => {
        const other = await openBroker({ nats: { servers: server.url } });
        brokers.push(other);
        return new KvApprovalStore(other);
      },
    };
  });
});
