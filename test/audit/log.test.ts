import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { computeEntryHash, GENESIS_HASH } from "../../src/audit/entry.js";
import {
  AuditEntrySchema,
  AuditLog,
  AuditLogError,
  auditEntryFor,
  readAudit,
  verifyAudit,
} from "../../src/audit/index.js";
import { AppendLog } from "../../src/jsonl/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { appendRequests, exampleRequest, manualClock, readLinesOf } from "./fixtures.js";

const tmp = useTmpDir("acp-audit-");
const opened: AuditLog[] = [];
afterEach(async () => {
  for (const log of opened.splice(0)) await log.close();
});

async function openLog(root: string, clock = manualClock("2026-01-31T23:59:00Z")) {
  const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
  opened.push(log);
  return { log, clock };
}

async function collect(root: string) {
  const seqs: number[] = [];
  for await (const record of readAudit({ root, agent: "agent-alpha" })) seqs.push(record.entry.seq);
  return seqs;
}

describe("AuditLog: append, read, rotation", () => {
  it("appends JSONL entries with the core protocol's fields and a hash chain starting at the genesis hash", async () => {
    const root = tmp();
    const { log } = await openLog(root);
    const [first, second] = await appendRequests(log, 2);
    const lines = readLinesOf(join(root, "agent-alpha", "2026-01.jsonl"));
    expect(lines).toHaveLength(2);
    const stored = JSON.parse(lines[0]!);
    expect(Object.keys(stored)).toEqual([
      "seq",
      "ts",
      "direction",
      "from",
      "to",
      "type",
      "method",
      "id",
      "summary",
      "channel",
      "prev",
      "hash",
    ]);
    expect(stored).toMatchObject({
      seq: 1,
      ts: "2026-01-31T23:59:00.000Z",
      direction: "sent",
      from: { agent: "agent-alpha", principal: "principal-a" },
      to: { agent: "agent-beta", principal: "principal-b" },
      type: "request",
      method: "agent.request",
      id: "req-1",
      channel: "nats:agent.agent-beta.inbox",
      prev: GENESIS_HASH,
    });
    expect(AuditEntrySchema.parse(stored)).toEqual(first);
    expect(computeEntryHash(stored)).toBe(first!.hash);
    expect(second!.prev).toBe(first!.hash);
    expect(log.head).toEqual({ seq: 2, hash: second!.hash });
  });

  it("rolls over to a new month file at the UTC month boundary, chaining across files", async () => {
    const root = tmp();
    const { log, clock } = await openLog(root, manualClock("2026-01-31T23:59:59.999Z"));
    const [january] = await appendRequests(log, 1);
    clock.set("2026-02-01T00:00:00.000Z");
    const [february] = await appendRequests(log, 1, 2);
    clock.set("2027-01-01T00:00:00.000Z");
    await appendRequests(log, 1, 3);
    const dir = join(root, "agent-alpha");
    expect(readdirSync(dir).filter((f) => f.endsWith(".jsonl"))).toEqual([
      "2026-01.jsonl",
      "2026-02.jsonl",
      "2027-01.jsonl",
    ]);
    expect(february!.prev).toBe(january!.hash);
    expect(await collect(root)).toEqual([1, 2, 3]);
    expect((await verifyAudit(dir)).ok).toBe(true);
  });

  it("keeps writing the newest file when the clock steps back across a month boundary", async () => {
    const root = tmp();
    const { log, clock } = await openLog(root, manualClock("2026-02-01T00:00:01Z"));
    await appendRequests(log, 1);
    clock.set("2026-01-31T23:59:59Z");
    const [late] = await appendRequests(log, 1, 2);
    expect(late!.ts).toBe("2026-01-31T23:59:59.000Z");
    expect(readdirSync(join(root, "agent-alpha")).filter((f) => f.endsWith(".jsonl"))).toEqual([
      "2026-02.jsonl",
    ]);
    expect((await verifyAudit(join(root, "agent-alpha"))).ok).toBe(true);
  });

  it("serialises concurrent appends from one process into consecutive seqs and whole lines", async () => {
    const root = tmp();
    const { log } = await openLog(root);
    const message = exampleRequest();
    const entries = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        log.append(auditEntryFor(message, { direction: "sent", channel: `ch-${i}` })),
      ),
    );
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(entries.map((e) => e.channel)).toEqual(Array.from({ length: 200 }, (_, i) => `ch-${i}`));
    const verification = await verifyAudit(join(root, "agent-alpha"));
    expect(verification).toMatchObject({ ok: true, entries: 200 });
  });

  it("writes the entries appended in one turn with one append, and the next turn's with another", async () => {
    const root = tmp();
    const { log } = await openLog(root);
    const message = exampleRequest();
    const appends = vi.spyOn(AppendLog.prototype, "append");
    try {
      const turn = (from: number) =>
        Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            log.append(auditEntryFor(message, { direction: "sent", channel: `ch-${from + i}` })),
          ),
        );
      const first = await turn(0);
      const second = await turn(16);
      expect(appends).toHaveBeenCalledTimes(2);
      expect([...first, ...second].map((e) => e.seq)).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
    } finally {
      appends.mockRestore();
    }
    const lines = readLinesOf(join(root, "agent-alpha", "2026-01.jsonl"));
    expect(lines.map((line) => (JSON.parse(line) as { channel: string }).channel)).toEqual(
      Array.from({ length: 32 }, (_, i) => `ch-${i}`),
    );
    expect(await verifyAudit(join(root, "agent-alpha"))).toMatchObject({ ok: true, entries: 32 });
  });

  it("files the entries of one batch by their own time when the batch crosses a month boundary", async () => {
    const root = tmp();
    const times = ["2026-01-31T23:59:59.998Z", "2026-01-31T23:59:59.999Z", "2026-02-01T00:00:00.000Z"];
    let call = 0;
    const log = await AuditLog.open({
      agent: "agent-alpha",
      root,
      clock: () => new Date(times[Math.min(call++, times.length - 1)]!),
    });
    opened.push(log);
    const message = exampleRequest();
    // Appended in one turn: written together, but each entry keeps its own time and month file.
    const entries = await Promise.all(
      [0, 1, 2, 3].map((i) => log.append(auditEntryFor(message, { direction: "sent", channel: `ch-${i}` }))),
    );
    expect(entries.map((e) => [e.seq, e.ts.slice(0, 7)])).toEqual([
      [1, "2026-01"],
      [2, "2026-01"],
      [3, "2026-02"],
      [4, "2026-02"],
    ]);
    const dir = join(root, "agent-alpha");
    expect(readLinesOf(join(dir, "2026-01.jsonl"))).toHaveLength(2);
    expect(readLinesOf(join(dir, "2026-02.jsonl"))).toHaveLength(2);
    expect(await verifyAudit(dir)).toMatchObject({ ok: true, entries: 4, files: 2 });
  });
  it("continues the chain after close and reopen", async () => {
    const root = tmp();
    const first = await openLog(root);
    await appendRequests(first.log, 2);
    await first.log.close();
    const second = await openLog(root, manualClock("2026-03-05T10:00:00Z"));
    expect(second.log.head.seq).toBe(2);
    const [third] = await appendRequests(second.log, 1, 3);
    expect(third!.seq).toBe(3);
    expect(await verifyAudit(join(root, "agent-alpha"))).toMatchObject({ ok: true, entries: 3, files: 2 });
  });

  it("writes files readable only by their owner, and fsyncs when asked", async () => {
    const root = tmp();
    const log = await AuditLog.open({ agent: "agent-alpha", root, fsync: true });
    opened.push(log);
    await appendRequests(log, 2);
    const [file] = readdirSync(join(root, "agent-alpha")).filter((f) => f.endsWith(".jsonl"));
    expect(statSync(join(root, "agent-alpha", file!)).mode & 0o777).toBe(0o600);
    expect(await collect(root)).toEqual([1, 2]);
  });

  it("uses $ACP_AUDIT_DIR when no root is given", async () => {
    const root = tmp();
    const saved = process.env.ACP_AUDIT_DIR;
    process.env.ACP_AUDIT_DIR = root;
    try {
      const log = await AuditLog.open({ agent: "agent-alpha" });
      opened.push(log);
      expect(log.dir).toBe(join(root, "agent-alpha"));
    } finally {
      if (saved === undefined) delete process.env.ACP_AUDIT_DIR;
      else process.env.ACP_AUDIT_DIR = saved;
    }
  });
});

describe("AuditLog: several processes of one agent (writers: shared)", () => {
  const WRITER = fileURLToPath(new URL("./fixtures/shared-writer.mjs", import.meta.url));

  it("takes appends from several processes at once into one unbroken chain", async () => {
    const root = tmp();
    const writers = ["one", "two", "three"].map(
      (name) =>
        new Promise<number | null>((resolve) => {
          const child = spawn(process.execPath, [WRITER, root, "agent-alpha", name, "40"], {
            stdio: "inherit",
          });
          child.once("exit", (code) => resolve(code));
        }),
    );
    // This process writes too, meanwhile.
    const mine = await AuditLog.open({ agent: "agent-alpha", root, writers: "shared" });
    await appendRequests(mine, 20);
    await mine.close();
    expect(await Promise.all(writers)).toEqual([0, 0, 0]);
    expect(await verifyAudit(join(root, "agent-alpha"))).toMatchObject({ ok: true, entries: 140 });
    expect(await collect(root)).toEqual(Array.from({ length: 140 }, (_, i) => i + 1));
  });

  it("keeps one chain when many processes take turns at every append", async () => {
    // A writer that found the lock held, then gone, once took the next holder's fresh lock for a
    // stale one and removed it: two writers built on the same line (the chain forked in most runs).
    const root = tmp();
    const writers = Array.from(
      { length: 8 },
      (_, n) =>
        new Promise<number | null>((resolve) => {
          const child = spawn(process.execPath, [WRITER, root, "agent-alpha", `w${n}`, "40", "1"], {
            stdio: "inherit",
          });
          child.once("exit", (code) => resolve(code));
        }),
    );
    expect(await Promise.all(writers)).toEqual(Array(8).fill(0));
    expect(await verifyAudit(join(root, "agent-alpha"))).toMatchObject({ ok: true, entries: 320 });
  }, 60_000);

  it("shares with another writer of this process, and waits for a single writer to let go", async () => {
    const root = tmp();
    const [a, b] = await Promise.all([
      AuditLog.open({ agent: "agent-alpha", root, writers: "shared" }),
      AuditLog.open({ agent: "agent-alpha", root, writers: "shared" }),
    ]);
    await Promise.all([appendRequests(a, 5), appendRequests(b, 5, 100)]);
    await Promise.all([a.close(), b.close()]);
    // A single writer holds the lock while it is open: a shared one waits its turn.
    const single = await AuditLog.open({ agent: "agent-alpha", root });
    const waiting = AuditLog.open({ agent: "agent-alpha", root, writers: "shared" }).then(async (c) => {
      await appendRequests(c, 1, 200);
      await c.close();
    });
    await appendRequests(single, 1, 300);
    await single.close();
    await waiting;
    expect(await verifyAudit(join(root, "agent-alpha"))).toMatchObject({ ok: true, entries: 12 });
    expect(await collect(root)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  });
});

describe("AuditLog: rejections", () => {
  it("rejects an entry naming each wrong field, and writes nothing", async () => {
    const root = tmp();
    const { log } = await openLog(root);
    const good = auditEntryFor(exampleRequest(), { direction: "sent", channel: "nats:x" });
    await expect(log.append({ ...good, direction: "sideways" as "sent", channel: "" })).rejects.toThrow(
      /direction: .*; channel: must not be empty/,
    );
    await expect(log.append({ ...good, extra: 1 } as typeof good)).rejects.toThrow(/Unrecognized key.*extra/);
    await expect(log.append({ ...good, summary: "half a pair \ud800" })).rejects.toThrow(/lone surrogate/);
    // A failed append does not disturb the chain.
    const [entry] = await appendRequests(log, 1);
    expect(entry!.seq).toBe(1);
  });

  it("rejects an agent id that is not a safe directory name", async () => {
    await expect(AuditLog.open({ agent: "../escape", root: tmp() })).rejects.toThrow(
      /agent id "..\/escape" must be/,
    );
  });

  it("refuses a second writer on the same agent's log in this process", async () => {
    const root = tmp();
    await openLog(root);
    await expect(AuditLog.open({ agent: "agent-alpha", root })).rejects.toThrow(
      /already open for writing in this process/,
    );
  });

  it("refuses a writer while another live process holds the lock", async () => {
    const root = tmp();
    const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
    try {
      const dir = join(root, "agent-alpha");
      await openLog(root).then(({ log }) => log.close());
      writeFileSync(join(dir, "writer.lock"), `${other.pid}\n`);
      await expect(AuditLog.open({ agent: "agent-alpha", root })).rejects.toThrow(
        new RegExp(`already open for writing by process ${other.pid}`),
      );
    } finally {
      other.kill();
    }
  });

  it("takes over a stale lock left by a process that is gone", async () => {
    const root = tmp();
    const dead = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
    const dir = join(root, "agent-alpha");
    await openLog(root).then(({ log }) => log.close());
    writeFileSync(join(dir, "writer.lock"), dead.stdout);
    const { log } = await openLog(root);
    await appendRequests(log, 1);
    expect(readFileSync(join(dir, "writer.lock"), "utf8")).toBe(`${process.pid}\n`);
  });

  it("refuses to continue a log whose last line is not a valid entry", async () => {
    const root = tmp();
    const { log } = await openLog(root);
    await appendRequests(log, 1);
    await log.close();
    appendFileSync(join(root, "agent-alpha", "2026-01.jsonl"), "garbage\n");
    await expect(AuditLog.open({ agent: "agent-alpha", root })).rejects.toThrow(
      /2026-01\.jsonl: the last line is not a valid audit entry.*acp audit verify.*\(not JSON\)/,
    );
    // The lock was released: nothing else stays held after the failed open.
    expect(existsSync(join(root, "agent-alpha", "writer.lock"))).toBe(false);
  });

  it("finishes appends queued before close and rejects those after it", async () => {
    const root = tmp();
    const { log } = await openLog(root);
    const entry = auditEntryFor(exampleRequest(), { direction: "sent", channel: "c" });
    const queued = Promise.all([log.append(entry), log.append(entry), log.append(entry)]);
    await log.close();
    expect((await queued).map((e) => e.seq)).toEqual([1, 2, 3]);
    await expect(appendRequests(log, 1)).rejects.toThrow(AuditLogError);
    expect(await collect(root)).toEqual([1, 2, 3]);
  });
});

describe("AuditLog: crash safety", () => {
  it("moves a torn last line aside on open, then appends and reads normally", async () => {
    const root = tmp();
    const dir = join(root, "agent-alpha");
    const file = join(dir, "2026-01.jsonl");
    const first = await openLog(root);
    const [entry] = await appendRequests(first.log, 2);
    await first.log.close();
    // What a crash mid-write leaves: the start of a line, no newline.
    const whole = JSON.stringify(entry);
    const half = whole.slice(0, Math.floor(whole.length / 2));
    appendFileSync(file, half);

    // Before any repair, readers and the verifier do not take the fragment for an entry.
    expect(await collect(root)).toEqual([1, 2]);
    expect(await verifyAudit(dir)).toMatchObject({ ok: true, entries: 2, tornTail: { file, line: 3 } });

    const second = await openLog(root, manualClock("2026-01-31T23:59:30Z"));
    expect(second.log.recovered).toMatchObject({ file, bytes: Buffer.byteLength(half) });
    const moved = second.log.recovered!.movedTo;
    expect(moved).toMatch(/2026-01\.jsonl\.torn-2026-01-31T23-59-30-000Z$/);
    expect(readFileSync(moved, "utf8")).toBe(half);
    expect(readFileSync(file, "utf8").endsWith("}\n")).toBe(true);

    await appendRequests(second.log, 1, 3);
    expect(await collect(root)).toEqual([1, 2, 3]);
    const verification = await verifyAudit(dir);
    expect(verification).toMatchObject({ ok: true, entries: 3 });
    expect(verification.tornTail).toBeUndefined();
  });

  it("repairs a torn line in a process that was killed, in a fresh process", async () => {
    const root = tmp();
    const dir = join(root, "agent-alpha");
    await openLog(root).then(async ({ log }) => {
      await appendRequests(log, 1);
      await log.close();
    });
    // A real child process writes part of a line and dies holding the lock.
    const child = spawnSync(
      process.execPath,
      [
        "-e",
        `const fs=require("node:fs");fs.writeFileSync(${JSON.stringify(join(dir, "writer.lock"))}, process.pid+"\\n");` +
          `fs.appendFileSync(${JSON.stringify(join(dir, "2026-01.jsonl"))}, '{"seq":2,"ts":"2026-01-31T');process.kill(process.pid,"SIGKILL")`,
      ],
      { encoding: "utf8" },
    );
    expect(child.signal).toBe("SIGKILL");
    const { log } = await openLog(root);
    expect(log.recovered?.bytes).toBe('{"seq":2,"ts":"2026-01-31T'.length);
    const [entry] = await appendRequests(log, 1, 2);
    expect(entry!.seq).toBe(2);
    expect((await verifyAudit(dir)).ok).toBe(true);
  });
});
