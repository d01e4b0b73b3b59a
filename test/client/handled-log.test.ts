import { mkdirSync, writeFileSync } from "node:fs";
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
});
