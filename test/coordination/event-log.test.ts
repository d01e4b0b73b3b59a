import { appendFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  type LoggedEvent,
  type LogProblem,
  MAX_EVENT_BYTES,
  readEventsFrom,
  Session,
} from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";

const at = "2025-01-23T10:00:00Z";
const line = (fields: Record<string, unknown>) =>
  `${JSON.stringify({ timestamp: at, from: "a", ...fields })}\n`;

describe("messages.jsonl", () => {
  const tmp = useTmpDir();

  it("detects a torn last line after a crash and reports it instead of parsing it", async () => {
    const session = await Session.create({ root: tmp() });
    for (const n of [1, 2, 3]) await session.log({ from: "a", type: "status", message: `event ${n}` });
    // A writer that died mid-line (the one fault we cannot cause for real with single writes).
    const torn = line({ type: "status", message: "never finished" }).slice(0, 40);
    appendFileSync(session.paths.messages, torn);

    const { events, problems } = await session.readEvents();
    expect(events.map((e) => e.event.message)).toEqual(["event 1", "event 2", "event 3"]);
    expect(problems).toEqual([
      expect.objectContaining({ kind: "torn", line: 4, bytes: 40, file: session.paths.messages }),
    ]);
    expect(problems[0]?.message).toMatch(/messages\.jsonl:4: torn line/);
  });

  it("starts the next event on a line of its own after a torn line, losing nothing", async () => {
    const session = await Session.create({ root: tmp() });
    await session.log({ from: "a", type: "status", message: "before" });
    appendFileSync(session.paths.messages, '{"timestamp":"2025-01-23T10:00:00Z","from":"a","ty');
    await session.log({ from: "b", type: "completed", message: "after" });

    const { events, problems } = await session.readEvents();
    expect(events.map((e) => [e.line, e.event.message])).toEqual([
      [1, "before"],
      [3, "after"],
    ]);
    expect(problems.map((p) => [p.kind, p.line])).toEqual([["torn", 2]]);
  });

  it("reports hand-written mistakes with file, line and field, and still reads every other line", async () => {
    const session = await Session.create({ root: tmp() });
    writeFileSync(
      session.paths.messages,
      [
        line({ type: "status", message: "ok 1" }),
        "{not json}\n",
        line({ type: "finding", severity: "urgent", data: { title: "x" } }),
        line({ type: "status" }),
        line({ type: "gossip", message: "hi" }),
        line({ type: "data", description: "no artifact" }),
        line({ type: "error", error: "details but no message" }),
        line({ type: "completed" }),
        line({ type: "finding", severity: "low" }),
        line({ type: "status", message: "x", timestamp: "10:00" }),
        line({ type: "status", message: "x", from: "a/b" }),
        "\n",
        line({ type: "status", message: "ok 2" }).replace("\n", "\r\n"),
      ].join(""),
    );
    const { events, problems } = await session.readEvents();
    expect(events.map((e) => [e.line, e.event.message])).toEqual([
      [1, "ok 1"],
      [13, "ok 2"],
    ]);
    const file = session.paths.messages;
    expect(problems.map((p) => [p.kind, p.line])).toEqual([
      ["invalid", 2],
      ["invalid", 3],
      ["invalid", 4],
      ["invalid", 5],
      ["invalid", 6],
      ["invalid", 7],
      ["invalid", 8],
      ["invalid", 9],
      ["invalid", 10],
      ["invalid", 11],
    ]);
    expect(problems[0]?.message).toContain(`${file}:2: not valid JSON`);
    expect(problems[1]?.message).toContain(`${file}:3: severity: Invalid option`);
    expect(problems[2]?.message).toContain(`${file}:4: message: required field is missing`);
    expect(problems[3]?.message).toContain(`${file}:5: type: Invalid discriminator`);
    expect(problems[4]?.message).toContain(`${file}:6: artifact: required field is missing`);
    expect(problems[5]?.message).toContain(`${file}:7: message: required field is missing`);
    expect(problems[6]?.message).toContain(`${file}:8: message: required field is missing`);
    expect(problems[7]?.message).toContain(`${file}:9: message: a finding needs a message or data.title`);
    expect(problems[8]?.message).toContain(`${file}:10: timestamp: must be an ISO 8601 timestamp`);
    expect(problems[9]?.message).toContain(`${file}:11: from: must be 1-128 letters`);
  });

  it("leaves a line still being written for later, then reads it once it ends", async () => {
    const session = await Session.create({ root: tmp() });
    const full = line({ type: "status", message: "slow writer" });
    appendFileSync(session.paths.messages, full.slice(0, 30));
    const first = await readEventsFrom(session.paths.messages);
    expect(first).toMatchObject({ events: [], problems: [], next: { offset: 0, line: 1 }, pendingBytes: 30 });
    appendFileSync(session.paths.messages, full.slice(30));
    const second = await readEventsFrom(session.paths.messages, first.next);
    expect(second.events.map((e) => e.event.message)).toEqual(["slow writer"]);
    expect(second.pendingBytes).toBe(0);
  });

  it("rejects an event too large to append as one write", async () => {
    const session = await Session.create({ root: tmp() });
    const attempt = session.log({ from: "a", type: "status", message: "x".repeat(MAX_EVENT_BYTES) });
    await expect(attempt).rejects.toThrow(/put large data in an artifact/);
  });

  it("rejects an invalid event before writing it, naming the field", async () => {
    const session = await Session.create({ root: tmp() });
    await expect(
      session.log({ from: "a", type: "finding", message: "no severity" } as never),
    ).rejects.toThrow(/^event: severity: required field is missing/);
    await expect(session.log({ from: "../etc", type: "status", message: "x" })).rejects.toThrow(
      /^event: from:/,
    );
    expect((await session.readEvents()).events).toEqual([]);
  });

  it("ends a follow with an error when the log is truncated under it", async () => {
    const session = await Session.create({ root: tmp() });
    await session.log({ from: "a", type: "status", message: "will vanish" });
    let delivered: () => void = () => undefined;
    const read = new Promise<void>((resolve) => {
      delivered = resolve;
    });
    const following = session.follow(() => delivered(), { watch: { intervalMs: 20 } });
    await read;
    writeFileSync(session.paths.messages, "");
    await expect(following).rejects.toThrow(/shrank from \d+ to 0 bytes: the log was truncated/);
  });

  for (const pollOnly of [false, true]) {
    it(`follows live: old events, then each new one once, torn lines reported once (${pollOnly ? "polling" : "fs.watch"})`, async () => {
      const session = await Session.create({ root: tmp() });
      await session.log({ from: "a", type: "status", message: "old" });
      const seen: LoggedEvent[] = [];
      const problems: LogProblem[] = [];
      const controller = new AbortController();
      const until = async (check: () => boolean) => {
        while (!check()) await new Promise((r) => setTimeout(r, 10));
      };
      const following = session.follow((e) => seen.push(e), {
        signal: controller.signal,
        filter: { from: "a" },
        onProblem: (p) => problems.push(p),
        tornAfterMs: 50,
        watch: { intervalMs: 20, pollOnly },
      });
      await until(() => seen.length === 1);
      await session.log({ from: "b", type: "status", message: "filtered out" });
      await session.log({ from: "a", type: "finding", severity: "high", message: "new" });
      await until(() => seen.length === 2);
      appendFileSync(session.paths.messages, '{"timestamp":"2025');
      await until(() => problems.length === 1);
      await session.log({ from: "a", type: "completed", message: "after the tear" });
      await until(() => seen.length === 3);
      controller.abort();
      await following;
      expect(seen.map((e) => [e.line, e.event.message])).toEqual([
        [1, "old"],
        [3, "new"],
        [5, "after the tear"],
      ]);
      expect(problems.map((p) => [p.kind, p.line])).toEqual([["torn", 4]]);
    });
  }
});
