import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CommitQueue, DEFERRED_WRITE_DELAY_MS } from "../../src/broker/embedded/commit-queue.js";
import { openDatabase } from "../../src/broker/embedded/database.js";
import type { SqliteDatabase } from "../../src/broker/embedded/sqlite.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-commit-queue-");
let db: SqliteDatabase;
let queue: CommitQueue;
let warnings: string[];

/** Rows of a scratch table: what the queue's ops wrote, and so what committed. */
function written(): string[] {
  return db
    .prepare<[], { label: string }>("SELECT label FROM writes ORDER BY rowid")
    .all()
    .map((row) => row.label);
}

function write(label: string): () => void {
  return () => {
    db.prepare("INSERT INTO writes (label) VALUES (?)").run(label);
  };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "clearImmediate"] });
  db = openDatabase(tmp(), "normal");
  db.exec("CREATE TABLE writes (label TEXT NOT NULL)");
  warnings = [];
  queue = new CommitQueue(db, (message) => warnings.push(message));
});

afterEach(() => {
  queue.close();
  db.close();
  vi.useRealTimers();
});

describe("CommitQueue: deferred writes", () => {
  it("holds a deferred write back while awaited writes commit, and commits it after the delay", async () => {
    queue.defer(write("delivered"));
    const submitted = queue.run(write("submitted"));
    vi.advanceTimersByTime(0); // the turn's setImmediate: the awaited write's batch
    await submitted;
    expect(written()).toEqual(["submitted"]);

    vi.advanceTimersByTime(DEFERRED_WRITE_DELAY_MS - 1);
    expect(written()).toEqual(["submitted"]);
    vi.advanceTimersByTime(1);
    expect(written()).toEqual(["submitted", "delivered"]);
    expect(warnings).toEqual([]);
  });

  it("runs a deferred op when it commits, so it writes the state as it is then (an ack that came first skips it)", () => {
    const row = { status: "delivered" };
    queue.defer(() => row.status === "delivered" && write("delivered")());
    row.status = "acknowledged";
    vi.advanceTimersByTime(DEFERRED_WRITE_DELAY_MS);
    expect(written()).toEqual([]);
  });

  it("commits every deferred write at the first one's deadline, not later ones' own", () => {
    queue.defer(write("first"));
    vi.advanceTimersByTime(DEFERRED_WRITE_DELAY_MS - 5);
    queue.defer(write("second"));
    vi.advanceTimersByTime(5);
    expect(written()).toEqual(["first", "second"]);
  });

  it("commits deferred writes at once on flush (reads see them) and on close", () => {
    queue.defer(write("flushed"));
    queue.flush();
    expect(written()).toEqual(["flushed"]);

    queue.defer(write("closed"));
    queue.close();
    expect(written()).toEqual(["flushed", "closed"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("reports a deferred write that fails as a warning, and later writes still commit", () => {
    queue.defer(() => {
      db.prepare("INSERT INTO no_such_table (x) VALUES (1)").run();
    });
    vi.advanceTimersByTime(DEFERRED_WRITE_DELAY_MS);
    expect(warnings).toEqual([expect.stringContaining("deferred write failed")]);
    expect(warnings[0]).toContain("no_such_table");

    queue.defer(write("after the failure"));
    vi.advanceTimersByTime(DEFERRED_WRITE_DELAY_MS);
    expect(written()).toEqual(["after the failure"]);
  });
});

describe("CommitQueue: a write alone", () => {
  it("commits in a transaction of its own, so its failure does not undo the writes of its turn", async () => {
    const alone = queue.runAlone(() => {
      write("swept")();
      throw new Error("disk I/O error");
    });
    const submitted = queue.run(write("submitted"));
    vi.advanceTimersByTime(0);
    await submitted;
    await expect(alone).rejects.toMatchObject({ kind: "unavailable" });
    expect(written()).toEqual(["submitted"]);
  });

  it("runs its after-commit step once committed, and is refused once the queue is closed", async () => {
    const after: string[] = [];
    const alone = queue.runAlone(write("swept"), () => after.push(written().join()));
    expect(written()).toEqual([]);
    vi.advanceTimersByTime(0);
    await alone;
    expect(after).toEqual(["swept"]);
    queue.close();
    await expect(queue.runAlone(write("late"))).rejects.toMatchObject({ kind: "closed" });
    expect(written()).toEqual(["swept"]);
  });
});
