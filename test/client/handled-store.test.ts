/**
 * The application's store of handled messages (SqliteHandledStore on a real SQLite file, a real
 * gateway): the SDK asks it before running a handler and trusts what it says, so a message an earlier
 * run handled in its own transaction is only acknowledged, and a request it answered is answered
 * from the record, never by running the handler again.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { AcpAgent, GatewayClient, SqliteHandledStore } from "../../src/client/index.js";
import { ErrorCode, generateIdentity } from "../../src/protocol/index.js";
import { startTestGateway } from "../helpers/gateway.js";
import { eventually } from "./fixtures.js";
import { useTestbed } from "./testbed.js";

function openStore(file: string) {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE IF NOT EXISTS effects (what TEXT NOT NULL)");
  return { db, store: new SqliteHandledStore(db) };
}

describe("SqliteHandledStore", () => {
  const t = useTestbed((options) => startTestGateway(options));

  it("markHandled is refused outside a transaction: the record must commit with the effect", () => {
    const { db, store } = openStore(`${t.tmp()}/app.db`);
    expect(() => store.markHandled({ from: "alice", messageId: "m-1" })).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidParams,
        message: expect.stringContaining("db.transaction"),
      }),
    );
    expect(store.get("alice/m-1")).toBeUndefined();
    db.transaction(() => store.markHandled({ from: "alice", messageId: "m-1" }, { orderId: 7 }))();
    expect(store.get("alice/m-1")).toEqual({ result: { orderId: 7 } });
    // Per sender: another agent's m-1 is another message.
    expect(store.get("mallory/m-1")).toBeUndefined();
    store.record("alice/m-1", { done: true });
    expect(store.get("alice/m-1")).toEqual({ done: true });
    db.close();
  });

  it("an effect rolled back takes its record with it", () => {
    const { db, store } = openStore(`${t.tmp()}/app.db`);
    const handle = db.transaction((id: string) => {
      db.prepare("INSERT INTO effects (what) VALUES (?)").run("order");
      store.markHandled({ from: "alice", messageId: id });
      throw new Error("the handler failed after its write");
    });
    expect(() => handle("m-2")).toThrow("the handler failed");
    expect(store.get("alice/m-2")).toBeUndefined();
    expect(db.prepare("SELECT count(*) AS n FROM effects").get()).toEqual({ n: 0 });
    db.close();
  });

  it("forgets records past their retention", () => {
    const { db } = openStore(`${t.tmp()}/app.db`);
    const store = new SqliteHandledStore(db, { retentionMs: 60_000 });
    store.record("old", { done: true });
    store.record("new", { done: true });
    db.prepare("UPDATE acp_handled SET handled_at = ? WHERE message_id = 'old'").run(Date.now() - 120_000);
    expect(store.prune()).toBe(1);
    expect([store.get("old"), store.get("new")]).toEqual([undefined, { done: true }]);
    expect(() => new SqliteHandledStore(db, { retentionMs: 0 })).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidParams }),
    );
    db.close();
  });

  it("a handler writing its effect and markHandled in one transaction runs once; the SDK records done", async () => {
    const { db, store } = openStore(`${t.tmp()}/app.db`);
    const bob = await t.connected(t.beta, { handledStore: store });
    const insert = db.prepare("INSERT INTO effects (what) VALUES (?)");
    bob.onNotification((body, ctx) =>
      db.transaction(() => {
        insert.run(String(body.what));
        store.markHandled(ctx);
      })(),
    );
    const alice = await t.connected(t.alpha);
    const { id } = await alice.notify("bob-assistant", { what: "order 42" });
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
    expect(store.get(`alice-assistant/${id}`)).toEqual({ done: true });
    expect(db.prepare("SELECT what FROM effects").all()).toEqual([{ what: "order 42" }]);
  });

  it("a queued message the store says was handled is acknowledged without running the handler", async () => {
    const { store } = openStore(`${t.tmp()}/app.db`);
    const alice = await t.connected(t.alpha);
    const bobFirst = await t.connected(t.beta);
    await alice.handshake("bob-assistant");
    await bobFirst.close(); // the handshake stays in bob's state
    const { id } = await alice.notify("bob-assistant", { what: "order 43" });
    // An earlier run handled it in its transaction and died before the ack.
    store.record(`alice-assistant/${id}`, {});
    const bob = await t.connected(t.beta, { handledStore: store });
    let runs = 0;
    bob.onNotification(() => {
      runs++;
    });
    await eventually(async () => (await t.statusOf(t.alpha, id)).status === "acknowledged", "acknowledged");
    expect(runs).toBe(0);
    expect(store.get(`alice-assistant/${id}`)).toEqual({ done: true });
  });

  it("a request the store says was handled is answered from its recorded result, or with an error saying the result is lost", async () => {
    const { store } = openStore(`${t.tmp()}/app.db`);
    const alice = await t.connected(t.alpha);
    const bobFirst = await t.connected(t.beta);
    await alice.handshake("bob-assistant");
    await bobFirst.close();
    const withResult = alice.request("bob-assistant", { order: 1 });
    const withoutResult = alice.request("bob-assistant", { order: 2 });
    const bobsView = new GatewayClient({ gateway: t.gw.url, apiKey: t.beta.apiKey });
    let queued: { id: string }[] = [];
    await eventually(async () => {
      queued = (await bobsView.listMessages({ status: "queued" })).items;
      return queued.length === 2;
    }, "both requests queued");
    const orderOf = async (id: string) =>
      ((await bobsView.getMessage(id, "alice-assistant")).envelope as { params: { body: { order: number } } })
        .params.body.order;
    const byOrder = new Map(await Promise.all(queued.map(async (m) => [await orderOf(m.id), m] as const)));
    const [first, second] = [byOrder.get(1), byOrder.get(2)] as [{ id: string }, { id: string }];
    store.record(`alice-assistant/${first.id}`, { result: { booked: "slot 1" } });
    store.record(`alice-assistant/${second.id}`, {});
    const bob = await t.connected(t.beta, { handledStore: store });
    let runs = 0;
    bob.onRequest(() => {
      runs++;
      return { booked: "again" };
    });
    await expect(withResult).resolves.toEqual({ booked: "slot 1" });
    await expect(withoutResult).rejects.toMatchObject({
      code: ErrorCode.InternalError,
      message: expect.stringContaining("its result was not recorded"),
    });
    expect(runs).toBe(0);
    await eventually(
      () => store.get(`alice-assistant/${second.id}`)?.done === true,
      "the second recorded done",
    );
  });

  it("refuses a handledStore without get and record, naming the option", () => {
    const base = { gateway: "http://127.0.0.1:1", apiKey: "k", identity: generateIdentity("a-agent", "p") };
    expect(() => new AcpAgent({ ...base, handledStore: {} as never })).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidParams,
        data: expect.objectContaining({ problems: [expect.objectContaining({ path: "/handledStore" })] }),
      }),
    );
  });
});
