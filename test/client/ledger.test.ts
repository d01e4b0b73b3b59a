/**
 * The delivery ledger and its file (real files in a temp dir): what a restarted agent remembers
 * about the deliveries it already handed to its application, and what it forgets.
 */
import { appendFileSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AcpAgent, type HandledStore, SqliteHandledStore } from "../../src/client/index.js";
import { DeliveryLedger } from "../../src/client/ledger.js";
import { ErrorCode, generateIdentity } from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";

const DAY = 24 * 3_600_000;
const tmp = useTmpDir("acp-client-ledger-");

function ledgerIn(root: string, options: { capacity?: number; retentionMs?: number } = {}) {
  return new DeliveryLedger({
    retentionMs: options.retentionMs ?? 7 * DAY,
    ...(options.capacity ? { capacity: options.capacity } : {}),
    persist: { root, agentId: "bob-assistant" },
  });
}

const lines = (file: string) => readFileSync(file, "utf8").split("\n").filter(Boolean);

describe("DeliveryLedger", () => {
  it("a new ledger on the same state root knows what the previous one finished", async () => {
    const root = tmp();
    const first = ledgerIn(root);
    await first.open();
    first.start("m-1");
    first.start("m-2");
    await first.finish("m-1");
    await first.close();
    const file = join(root, "bob-assistant", "handled.log");
    expect(first.file).toBe(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const second = ledgerIn(root);
    await second.open();
    expect(second.state("m-1")).toBe("done");
    expect(second.state("m-2")).toBe("new"); // started, never finished: it must run again
  });

  it("writes the line before finish() returns (a kill -9 right after loses nothing), durable when it resolves", async () => {
    const root = tmp();
    const ledger = ledgerIn(root);
    await ledger.open();
    const durable = ledger.finish("m-1");
    // Nothing awaited yet: the line is in the file already, not queued behind other work.
    expect(lines(join(root, "bob-assistant", "handled.log"))).toEqual([expect.stringContaining('"m-1"')]);
    await durable;
  });

  it("keeps a request's recorded response until it is finished, across a restart", async () => {
    const root = tmp();
    const response = { jsonrpc: "2.0", id: "r-1", result: { body: { ok: true } }, signature: "sig" };
    const first = ledgerIn(root);
    await first.open();
    first.start("r-1");
    await first.respond("r-1", response);
    await first.close(); // the process stops before the gateway accepted the response

    const second = ledgerIn(root);
    await second.open();
    expect(second.state("r-1")).toBe("respond");
    expect(await second.recorded("r-1")).toEqual({ response });
    await second.finish("r-1"); // sent again and accepted
    const third = ledgerIn(root);
    await third.open();
    expect(third.state("r-1")).toBe("done");
    expect(await third.recorded("r-1")).toEqual({ done: true });
  });

  it("without a state root nothing is written and a new ledger starts empty", async () => {
    const memoryOnly = new DeliveryLedger({ retentionMs: DAY });
    await memoryOnly.open();
    await memoryOnly.finish("m-1");
    expect(memoryOnly.file).toBeUndefined();
    expect(memoryOnly.state("m-1")).toBe("done");
    const next = new DeliveryLedger({ retentionMs: DAY });
    await next.open();
    expect(next.state("m-1")).toBe("new");
  });

  it("skips a torn last line (a crash mid-write) and keeps every complete one", async () => {
    const root = tmp();
    const ledger = ledgerIn(root);
    await ledger.open();
    await Promise.all(["a", "b", "c"].map((id) => ledger.finish(id)));
    await ledger.close();
    appendFileSync(join(root, "bob-assistant", "handled.log"), "[17999999999");
    const reopened = ledgerIn(root);
    await reopened.open();
    expect(["a", "b", "c", "d"].map((id) => reopened.state(id))).toEqual(["done", "done", "done", "new"]);
    await reopened.finish("d"); // appended after the torn line, on a line of its own
    const again = ledgerIn(root);
    await again.open();
    expect(again.state("d")).toBe("done");
  });

  it("forgets ids past their retention (a redelivery that old fails the timestamp check anyway)", async () => {
    const root = tmp();
    const file = join(root, "bob-assistant", "handled.log");
    const ledger = ledgerIn(root);
    await ledger.open();
    await ledger.finish("fresh");
    appendFileSync(file, `${JSON.stringify([Date.now() - 1, "expired"])}\n`);
    const reopened = ledgerIn(root);
    await reopened.open();
    expect([reopened.state("fresh"), reopened.state("expired")]).toEqual(["done", "new"]);
  });

  it("keeps at most `capacity` ids, the newest, in memory and after a restart", async () => {
    const root = tmp();
    const ledger = ledgerIn(root, { capacity: 3 });
    await ledger.open();
    for (const id of ["1", "2", "3", "4", "5"]) await ledger.finish(id);
    expect(["1", "2", "3", "4", "5"].map((id) => ledger.state(id))).toEqual([
      "new",
      "new",
      "done",
      "done",
      "done",
    ]);
    const reopened = ledgerIn(root, { capacity: 3 });
    await reopened.open();
    expect(["2", "3", "5"].map((id) => reopened.state(id))).toEqual(["new", "done", "done"]);
  });

  it("rewrites the file once it holds more than twice the live ids, keeping other writers' lines", async () => {
    const root = tmp();
    const file = join(root, "bob-assistant", "handled.log");
    const ledger = ledgerIn(root, { capacity: 10, retentionMs: 3_600_000 });
    await ledger.open();
    await ledger.finish("first");
    // A line from another process of the same agent (e.g. `acp send`), unknown to this ledger.
    appendFileSync(file, `${JSON.stringify([Date.now() + DAY, "from-acp-send"])}\n`);
    const ids = Array.from({ length: 1_200 }, (_, n) => `m-${n}`);
    await Promise.all(ids.map((id) => ledger.finish(id)));
    await ledger.close();
    // 1,202 lines written in all: rewritten at about 1,000 down to the 10 newest, then appended to.
    expect(lines(file).length).toBeLessThan(300);
    const reopened = ledgerIn(root, { capacity: 1_000 });
    await reopened.open();
    expect(["from-acp-send", "m-1199", "first", "m-0"].map((id) => reopened.state(id))).toEqual([
      "done",
      "done",
      "new",
      "new",
    ]);
  });
});

describe("DeliveryLedger in memory", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("tells a delivery being processed from a new one, and forgets it when processing is abandoned", async () => {
    const ledger = new DeliveryLedger({ retentionMs: DAY });
    await ledger.open();
    ledger.start("m-1");
    ledger.start("m-2");
    expect([ledger.state("m-1"), ledger.inProgress]).toEqual(["processing", 2]);
    ledger.abandon("m-1"); // a redelivery brings it back
    await expect(ledger.finish("m-2")).resolves.toBeUndefined();
    expect([ledger.state("m-1"), ledger.state("m-2"), ledger.inProgress]).toEqual(["new", "done", 0]);
    await ledger.respond("r-1", { jsonrpc: "2.0", id: "r-1", result: {} });
    expect(await ledger.recorded("r-1")).toEqual({ response: { jsonrpc: "2.0", id: "r-1", result: {} } });
    await expect(ledger.close()).resolves.toBeUndefined();
  });

  it("forgets a finished id at the instant its retention ends", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.parse("2026-03-01T12:00:00Z");
    vi.setSystemTime(start);
    const ledger = new DeliveryLedger({ retentionMs: 60_000 });
    await ledger.finish("old");
    vi.setSystemTime(start + 59_999);
    await ledger.finish("next");
    expect(ledger.state("old")).toBe("done");
    vi.setSystemTime(start + 60_000);
    await ledger.finish("last");
    expect([ledger.state("old"), ledger.state("next"), ledger.state("last")]).toEqual([
      "new",
      "done",
      "done",
    ]);
  });
});

describe("DeliveryLedger with the application's HandledStore", () => {
  it("records a request's response and its finish in the store (a real SQLite file), and writes no file of its own", async () => {
    const db = new Database(join(tmp(), "app.db"));
    try {
      const store = new SqliteHandledStore(db);
      const ledger = new DeliveryLedger({
        retentionMs: DAY,
        store,
        persist: { root: tmp(), agentId: "bob" },
      });
      const response = { jsonrpc: "2.0", id: "r-1", result: { ok: true } };
      ledger.start("alice/r-1");
      await ledger.respond("alice/r-1", response);
      expect(store.get("alice/r-1")).toEqual({ response });
      await ledger.finish("alice/r-1");
      expect(store.get("alice/r-1")).toEqual({ done: true });
      expect(ledger.file).toBeUndefined();
      // A new ledger asks the store about what it has not seen itself.
      expect(await new DeliveryLedger({ retentionMs: DAY, store }).recorded("alice/r-1")).toEqual({
        done: true,
      });
    } finally {
      db.close();
    }
  });

  it("rejects finish when the store fails to record, synchronously or not", async () => {
    const failing = (how: "throws" | "rejects"): HandledStore => ({
      get: () => undefined,
      record: () => {
        if (how === "throws") throw new Error("disk full");
        return Promise.reject(new Error("disk full"));
      },
    });
    for (const how of ["throws", "rejects"] as const) {
      const ledger = new DeliveryLedger({ retentionMs: DAY, store: failing(how) });
      ledger.start("m-1");
      await expect(ledger.finish("m-1")).rejects.toThrow("disk full");
    }
  });
});

describe("DeliveryLedger's file", () => {
  it("is rewritten past twice the live ids, counting handled ids and requests awaiting acceptance alike", async () => {
    const root = tmp();
    const ledger = ledgerIn(root);
    await ledger.open();
    for (let n = 0; n < 300; n++) await ledger.finish(`done-${n}`);
    for (let n = 0; n < 300; n++) await ledger.respond(`asked-${n}`, { id: n });
    // 600 live ids: the file may hold 1,200 lines before it is rewritten. These lines keep the same 600.
    for (let n = 0; n < 600; n++) await ledger.finish("done-0");
    await ledger.close();
    expect(lines(join(root, "bob-assistant", "handled.log"))).toHaveLength(1_200);
  });
});

describe("AcpAgent submitRetry option", () => {
  const base = { gateway: "http://127.0.0.1:1", apiKey: "k", identity: generateIdentity("a-agent", "p") };

  it.each([
    [{ maxAttempts: 0 }, "submitRetry/maxAttempts"],
    [{ maxAttempts: 2.5 }, "submitRetry/maxAttempts"],
    [{ initialDelayMs: -1 }, "submitRetry/initialDelayMs"],
    [{ maxDelayMs: Number.NaN }, "submitRetry/maxDelayMs"],
  ])("refuses %o, naming %s", (submitRetry, path) => {
    expect(() => new AcpAgent({ ...base, submitRetry })).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidParams,
        data: expect.objectContaining({ problems: [expect.objectContaining({ path: `/${path}` })] }),
      }),
    );
  });

  it("accepts Infinity attempts (bounded by the caller's timeout alone)", () => {
    expect(() => new AcpAgent({ ...base, submitRetry: { maxAttempts: Infinity } })).not.toThrow();
  });
});
