import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type HandledEntry, HandledLog } from "../../src/client/handled-log.js";
import { useTmpDir } from "../helpers/tmp.js";

/** The handled-message ledger's file as it is read back: what counts, what is ignored, what expired. */
describe("HandledLog reading its file", () => {
  const tmp = useTmpDir("acp-handled-log-");
  const NOW = Date.parse("2026-03-01T12:00:00Z");
  const LATER = NOW + 60_000;

  function logWith(lines: string[], capacity = 100): HandledLog {
    const root = tmp();
    mkdirSync(join(root, "bob"), { recursive: true });
    writeFileSync(join(root, "bob", "handled.log"), lines.map((line) => `${line}\n`).join(""));
    const none: [string, HandledEntry][] = [];
    return new HandledLog(root, "bob", { count: () => 0, entries: () => none }, { capacity });
  }

  it("keeps each id's last line, with a response only when it is a JSON object, and ignores foreign lines", async () => {
    const log = logWith([
      JSON.stringify([LATER, "plain"]),
      JSON.stringify([LATER, "answered", { jsonrpc: "2.0", id: 1, result: {} }]),
      JSON.stringify([LATER, "array-response", [1, 2]]),
      JSON.stringify([LATER, "null-response", null]),
      JSON.stringify([LATER, "text-response", "x"]),
      JSON.stringify(["soon", "not-a-time"]),
      JSON.stringify([LATER, 42]),
      JSON.stringify({ expiresAt: LATER, id: "an-object" }),
      JSON.stringify([LATER]),
      "not json at all",
      JSON.stringify([LATER + 1, "plain"]),
    ]);
    try {
      const entries = new Map(await log.load(NOW));
      expect([...entries.keys()].sort()).toEqual(
        ["answered", "array-response", "null-response", "plain", "text-response"].sort(),
      );
      expect(entries.get("plain")).toEqual({ expiresAt: LATER + 1 });
      expect(entries.get("answered")).toEqual({
        expiresAt: LATER,
        response: { jsonrpc: "2.0", id: 1, result: {} },
      });
      for (const id of ["array-response", "null-response", "text-response"])
        expect(entries.get(id)).toEqual({ expiresAt: LATER });
    } finally {
      await log.close();
    }
  });

  it("drops an id whose last line expired (at its expiry, not after), and keeps the capacity newest", async () => {
    const lines = [
      JSON.stringify([LATER, "expired-later"]),
      JSON.stringify([NOW, "expired-later"]),
      JSON.stringify([NOW, "expires-now"]),
      JSON.stringify([NOW + 1, "a"]),
      JSON.stringify([NOW + 3, "c"]),
      JSON.stringify([NOW + 2, "b"]),
    ];
    const all = logWith(lines);
    const newest = logWith(lines, 2);
    try {
      expect(await all.load(NOW)).toEqual([
        ["a", { expiresAt: NOW + 1 }],
        ["b", { expiresAt: NOW + 2 }],
        ["c", { expiresAt: NOW + 3 }],
      ]);
      expect(await newest.load(NOW)).toEqual([
        ["b", { expiresAt: NOW + 2 }],
        ["c", { expiresAt: NOW + 3 }],
      ]);
    } finally {
      await all.close();
      await newest.close();
    }
  });

  it("starts empty when there is no file yet, and refuses a file it cannot read rather than forgetting it", async () => {
    const root = tmp();
    const fresh = new HandledLog(root, "bob", { count: () => 0, entries: () => [] }, { capacity: 10 });
    const unreadable = new HandledLog(root, "carol", { count: () => 0, entries: () => [] }, { capacity: 10 });
    mkdirSync(join(root, "carol", "handled.log"), { recursive: true }); // a directory: EISDIR, not ENOENT
    try {
      expect(await fresh.load()).toEqual([]);
      await expect(unreadable.load()).rejects.toMatchObject({ code: "EISDIR" });
    } finally {
      await fresh.close();
    }
  });
});

/** When the file is rewritten, and what survives the rewrite. */
describe("HandledLog compaction", () => {
  const tmp = useTmpDir("acp-handled-log-");
  const FAR = Date.now() + 3_600_000;

  /** A log whose ledger holds `live` (their lines already in the file, as the ledger's always are). */
  function logOf(root: string, live: [string, HandledEntry][] = [], capacity = 100_000): HandledLog {
    return new HandledLog(root, "bob", { count: () => live.length, entries: () => live }, { capacity });
  }
  const fileLines = (root: string) =>
    readFileSync(join(root, "bob", "handled.log"), "utf8")
      .split("\n")
      .filter(Boolean);
  /** A file of `count` lines, every one expired: the ledger holds none of them. */
  function expiredFile(root: string, count: number): void {
    mkdirSync(join(root, "bob"), { recursive: true });
    const lines = Array.from({ length: count }, (_, n) => `${JSON.stringify([1, `old-${n}`])}\n`);
    writeFileSync(join(root, "bob", "handled.log"), lines.join(""));
  }

  it("rewrites the file on the line that takes it past 1,000 lines, not before, counting the lines it found", async () => {
    const root = tmp();
    expiredFile(root, 998);
    const log = logOf(root);
    await log.load();
    await log.append("a", { expiresAt: FAR });
    await log.append("b", { expiresAt: FAR }); // the 1,000th line: not past the bound yet
    await log.close();
    expect(fileLines(root)).toHaveLength(1_000);

    const again = logOf(root);
    await again.load();
    await again.append("c", { expiresAt: FAR }); // the 1,001st: the file is rewritten with what is live
    await again.close();
    expect(fileLines(root).map((line) => JSON.parse(line)[1])).toEqual(["a", "b", "c"]);
  });

  it("waits for twice the live entries when that is more than 1,000 lines", async () => {
    const root = tmp();
    const live = Array.from({ length: 600 }, (_, n): [string, HandledEntry] => [
      `live-${n}`,
      { expiresAt: FAR },
    ]);
    mkdirSync(join(root, "bob"), { recursive: true });
    writeFileSync(
      join(root, "bob", "handled.log"),
      live.map(([id]) => `${JSON.stringify([FAR, id])}\n`).join(""),
    );
    const log = logOf(root, live);
    await log.load();
    for (let n = 0; n < 600; n++) await log.append("live-0", { expiresAt: FAR }); // 1,200 lines, 600 live
    await log.close();
    expect(fileLines(root)).toHaveLength(1_200);
  });

  it("rewrites again each time the file grows past the bound, keeping responses and every line appended meanwhile", async () => {
    const root = tmp();
    const response = { jsonrpc: "2.0", id: "r-1", result: {} };
    const log = logOf(root, [["r-1", { expiresAt: FAR, response }]]);
    await log.load();
    await log.append("r-1", { expiresAt: FAR, response });
    const kept: string[] = [];
    for (const round of [1, 2]) {
      // 1,000 lines that have expired already, then lines that must survive, one after the other,
      // so that many are appended while the rewrite the 1,001st line started is under way.
      for (let n = 0; n < 1_000; n++) await log.append(`expired-${round}-${n}`, { expiresAt: 1 });
      for (let n = 0; n < 200; n++) {
        kept.push(`kept-${round}-${n}`);
        await log.append(`kept-${round}-${n}`, { expiresAt: FAR });
      }
    }
    await log.close();
    const lines = fileLines(root);
    expect(lines.length).toBeLessThan(1_000); // 2,401 lines written: rewritten in each round
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    const reader = logOf(root);
    const entries = new Map(await reader.load());
    await reader.close();
    expect([...entries.keys()].sort()).toEqual(["r-1", ...kept].sort());
    expect(entries.get("r-1")).toEqual({ expiresAt: FAR, response });
  });
});
