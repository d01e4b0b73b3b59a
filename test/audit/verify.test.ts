import { appendFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { computeEntryHash } from "../../src/audit/entry.js";
import { AuditLog, verifyAudit, verifyAuditRoot } from "../../src/audit/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { appendRequests, manualClock, readLinesOf, threeMonthLog, writeLinesTo } from "./fixtures.js";

const tmp = useTmpDir("acp-audit-verify-");

/** Replaces line `index` (0-based) of a file with `edit(entry)`, optionally re-sealing its hash. */
function editLine(
  file: string,
  index: number,
  edit: (entry: Record<string, unknown>) => void,
  reseal = false,
): void {
  const lines = readLinesOf(file);
  const entry = JSON.parse(lines[index]!) as Record<string, unknown>;
  edit(entry);
  if (reseal) entry["hash"] = computeEntryHash(entry);
  lines[index] = JSON.stringify(entry);
  writeLinesTo(file, lines);
}

describe("verifyAudit", () => {
  it("accepts an intact log across month files and reports its head", async () => {
    const dir = await threeMonthLog(tmp());
    const result = await verifyAudit(dir);
    const lastLine = JSON.parse(readLinesOf(join(dir, "2026-03.jsonl"))[2]!);
    expect(result).toEqual({
      agent: "agent-alpha",
      dir,
      ok: true,
      files: 3,
      entries: 9,
      head: { seq: 9, hash: lastLine.hash },
    });
  });

  it("accepts an empty directory and a gap of months in which nothing was logged", async () => {
    const root = tmp();
    const clock = manualClock("2026-01-10T00:00:00Z");
    const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
    expect(await verifyAudit(log.dir)).toMatchObject({ ok: true, entries: 0, head: null });
    await appendRequests(log, 1);
    clock.set("2026-06-10T00:00:00Z");
    await appendRequests(log, 1, 2);
    await log.close();
    expect(await verifyAudit(log.dir)).toMatchObject({ ok: true, entries: 2, files: 2 });
  });

  it("reports an edited field as a hash mismatch on that line", async () => {
    const dir = await threeMonthLog(tmp());
    editLine(join(dir, "2026-02.jsonl"), 1, (e) => {
      e["summary"] = "Nothing happened here";
    });
    const result = await verifyAudit(dir);
    expect(result.ok).toBe(false);
    expect(result.entries).toBe(4);
    expect(result.problem).toEqual({
      reason: "hash-mismatch",
      file: join(dir, "2026-02.jsonl"),
      line: 2,
      message: "the entry's content does not match its hash (edited)",
    });
  });

  it("reports an edited entry whose hash was recomputed at the next line's prev", async () => {
    const dir = await threeMonthLog(tmp());
    editLine(join(dir, "2026-02.jsonl"), 1, (e) => (e["direction"] = "received"), true);
    expect((await verifyAudit(dir)).problem).toMatchObject({
      reason: "prev-mismatch",
      file: join(dir, "2026-02.jsonl"),
      line: 3,
      message: "prev does not match the hash of 2026-02.jsonl line 2 (that entry was altered or replaced)",
    });
  });

  it("reports a field added to an entry (even with its hash recomputed) as a schema violation", async () => {
    const dir = await threeMonthLog(tmp());
    editLine(join(dir, "2026-01.jsonl"), 0, (e) => (e["note"] = "added later"), true);
    expect((await verifyAudit(dir)).problem).toMatchObject({
      reason: "schema",
      line: 1,
      message: expect.stringMatching(/Unrecognized key.*note/),
    });
  });

  it("reports a deleted line as a seq gap at the line after it", async () => {
    const dir = await threeMonthLog(tmp());
    const file = join(dir, "2026-02.jsonl");
    const lines = readLinesOf(file);
    writeLinesTo(file, [lines[0]!, lines[2]!]);
    expect((await verifyAudit(dir)).problem).toEqual({
      reason: "seq-gap",
      file,
      line: 2,
      message: "expected seq 5, found 6: entry 5 is missing before this line (deleted, or lines reordered)",
    });
  });

  it("reports reordered lines at the first line out of place", async () => {
    const dir = await threeMonthLog(tmp());
    const file = join(dir, "2026-03.jsonl");
    const [a, b, c] = readLinesOf(file) as [string, string, string];
    writeLinesTo(file, [a, c, b]);
    expect((await verifyAudit(dir)).problem).toMatchObject({ reason: "seq-gap", file, line: 2 });
    writeLinesTo(file, [b, a, c]);
    expect((await verifyAudit(dir)).problem).toMatchObject({ reason: "seq-gap", file, line: 1 });
  });

  it("reports a repeated line as out of order", async () => {
    const dir = await threeMonthLog(tmp());
    const file = join(dir, "2026-01.jsonl");
    const [a, b, c] = readLinesOf(file) as [string, string, string];
    writeLinesTo(file, [a, b, b, c]);
    expect((await verifyAudit(dir)).problem).toMatchObject({
      reason: "seq-order",
      line: 3,
      message: "expected seq 3, found 2: an entry is repeated or lines were reordered",
    });
  });

  it("reports a deleted month file in the middle of the chain by name", async () => {
    const dir = await threeMonthLog(tmp());
    rmSync(join(dir, "2026-02.jsonl"));
    expect((await verifyAudit(dir)).problem).toEqual({
      reason: "missing-month",
      file: join(dir, "2026-03.jsonl"),
      line: 1,
      message:
        "entries 4–6 are missing: 2026-02.jsonl was deleted, or lines cut from the end of 2026-01.jsonl",
    });
  });

  it("reports a deleted first month file as a missing start", async () => {
    const dir = await threeMonthLog(tmp());
    rmSync(join(dir, "2026-01.jsonl"));
    expect((await verifyAudit(dir)).problem).toMatchObject({
      reason: "missing-start",
      file: join(dir, "2026-02.jsonl"),
      line: 1,
      message: expect.stringContaining("the log starts at seq 4: entries 1–3 are missing"),
    });
  });

  it("reports lines cut from the end of one month as a gap at the start of the next", async () => {
    const dir = await threeMonthLog(tmp());
    const file = join(dir, "2026-01.jsonl");
    writeLinesTo(file, readLinesOf(file).slice(0, 2));
    expect((await verifyAudit(dir)).problem).toMatchObject({
      reason: "seq-gap",
      file: join(dir, "2026-02.jsonl"),
      line: 1,
    });
  });

  it("reports appended garbage as bad JSON at its line", async () => {
    const dir = await threeMonthLog(tmp());
    appendFileSync(join(dir, "2026-03.jsonl"), "this is not an entry\n");
    expect((await verifyAudit(dir)).problem).toMatchObject({
      reason: "bad-json",
      file: join(dir, "2026-03.jsonl"),
      line: 4,
      message: expect.stringMatching(/^not JSON/),
    });
  });

  it("reports an empty line and valid JSON that is not an entry", async () => {
    const dir = await threeMonthLog(tmp());
    appendFileSync(join(dir, "2026-03.jsonl"), "\n");
    expect((await verifyAudit(dir)).problem).toMatchObject({ reason: "bad-json", line: 4 });
    const dir2 = await threeMonthLog(tmp());
    appendFileSync(join(dir2, "2026-03.jsonl"), '{"seq":10}\n');
    expect((await verifyAudit(dir2)).problem).toMatchObject({
      reason: "schema",
      line: 4,
      message: expect.stringContaining("ts:"),
    });
  });

  it("reports an entry filed under a month earlier than its timestamp", async () => {
    const root = tmp();
    const clock = manualClock("2026-02-10T00:00:00Z");
    const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
    await appendRequests(log, 2);
    await log.close();
    renameSync(join(log.dir, "2026-02.jsonl"), join(log.dir, "2026-01.jsonl"));
    expect((await verifyAudit(log.dir)).problem).toEqual({
      reason: "wrong-month",
      file: join(log.dir, "2026-01.jsonl"),
      line: 1,
      message: "ts 2026-02-10T00:00:00.000Z belongs in 2026-02.jsonl, not 2026-01.jsonl",
    });
  });

  it("reports an incomplete line in a month file that is not the newest", async () => {
    const dir = await threeMonthLog(tmp());
    appendFileSync(join(dir, "2026-01.jsonl"), '{"seq":');
    expect((await verifyAudit(dir)).problem).toMatchObject({ reason: "torn-line", line: 4 });
  });

  it("says there is no log for a directory that does not exist", async () => {
    await expect(verifyAudit(join(tmp(), "nobody"))).rejects.toThrow(/no audit log at .*nobody/);
  });

  it("verifies every agent under a root and stops each at its first problem", async () => {
    const root = tmp();
    await threeMonthLog(root);
    const beta = await AuditLog.open({
      agent: "agent-beta",
      root,
      clock: manualClock("2026-01-01T00:00:00Z").now,
    });
    await appendRequests(beta, 2);
    await beta.close();
    writeFileSync(join(root, "not an agent"), "");
    appendFileSync(join(beta.dir, "2026-01.jsonl"), "junk\n");
    const results = await verifyAuditRoot({ root });
    expect(results.map((r) => [r.agent, r.ok, r.problem?.line])).toEqual([
      ["agent-alpha", true, undefined],
      ["agent-beta", false, 3],
    ]);
  });
});
