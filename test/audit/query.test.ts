import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AuditLog, type AuditRecord, auditEntryFor, followAudit, readAudit } from "../../src/audit/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { appendRequests, manualClock, exampleResponse, threeMonthLog } from "./fixtures.js";

const tmp = useTmpDir("acp-audit-query-");

async function seqs(iterable: AsyncIterable<AuditRecord>): Promise<number[]> {
  const out: number[] = [];
  for await (const record of iterable) out.push(record.entry.seq);
  return out;
}

/** agent-alpha: a request to beta (Jan), beta's response (Feb), a request to gamma (Mar). */
async function conversation(root: string): Promise<void> {
  const clock = manualClock("2026-01-20T10:00:00Z");
  const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
  await appendRequests(log, 1);
  clock.set("2026-02-02T10:00:00Z");
  await log.append(
    auditEntryFor(exampleResponse("req-1"), {
      direction: "received",
      channel: "nats:agent.agent-alpha.inbox",
      self: { principal: "principal-a" },
    }),
  );
  clock.set("2026-03-03T10:00:00Z");
  await log.append({
    ...auditEntryFor(exampleResponse("req-x"), { direction: "received", channel: "c" }),
    from: { agent: "agent-gamma", principal: "principal-c" },
  });
  await log.close();
}

describe("readAudit", () => {
  it("reads entries in order across month files, with file and line", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    const records: AuditRecord[] = [];
    for await (const record of readAudit({ root, agent: "agent-alpha" })) records.push(record);
    expect(records.map((r) => r.entry.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(records[3]).toMatchObject({ agent: "agent-alpha", file: join(dir, "2026-02.jsonl"), line: 1 });
  });

  it("filters by time (inclusive), peer agent or principal, and type", async () => {
    const root = tmp();
    await conversation(root);
    const agent = "agent-alpha";
    expect(await seqs(readAudit({ root, agent, since: "2026-02-02T10:00:00Z" }))).toEqual([2, 3]);
    expect(await seqs(readAudit({ root, agent, until: new Date("2026-02-02T10:00:00Z") }))).toEqual([1, 2]);
    expect(await seqs(readAudit({ root, agent, since: "2026-02-01", until: "2026-02-28" }))).toEqual([2]);
    expect(await seqs(readAudit({ root, agent, peer: "agent-beta" }))).toEqual([1, 2]);
    expect(await seqs(readAudit({ root, agent, peer: "principal-c" }))).toEqual([3]);
    expect(await seqs(readAudit({ root, agent, type: "response" }))).toEqual([2, 3]);
    expect(await seqs(readAudit({ root, agent, type: "handoff" }))).toEqual([]);
  });

  it("merges every agent's log by time when no agent is named", async () => {
    const root = tmp();
    const clock = manualClock("2026-01-01T00:00:00Z");
    const alpha = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
    const beta = await AuditLog.open({ agent: "agent-beta", root, clock: clock.now });
    for (const [log, iso] of [
      [beta, "2026-01-01T00:00:01Z"],
      [alpha, "2026-01-01T00:00:02Z"],
      [beta, "2026-01-01T00:00:03Z"],
      [alpha, "2026-02-01T00:00:00Z"],
    ] as const) {
      clock.set(iso);
      await appendRequests(log, 1);
    }
    await Promise.all([alpha.close(), beta.close()]);
    const order: string[] = [];
    for await (const record of readAudit({ root })) order.push(`${record.agent}#${record.entry.seq}`);
    expect(order).toEqual(["agent-beta#1", "agent-alpha#1", "agent-beta#2", "agent-alpha#2"]);
  });

  it("names the file and line of a corrupt entry", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    appendFileSync(join(dir, "2026-02.jsonl"), "{oops\n");
    await expect(seqs(readAudit({ root, agent: "agent-alpha" }))).rejects.toThrow(
      `${join(dir, "2026-02.jsonl")} line 4: not JSON`,
    );
  });

  it("rejects an unknown agent and a date that is not a date", async () => {
    const root = tmp();
    await threeMonthLog(root);
    await expect(seqs(readAudit({ root, agent: "agent-zeta" }))).rejects.toThrow(
      `no audit log for agent agent-zeta under ${root}`,
    );
    await expect(seqs(readAudit({ root, since: "yesterday-ish" }))).rejects.toThrow(
      "since: not a valid date: yesterday-ish",
    );
  });
});

describe("followAudit", () => {
  it("yields new entries as they are appended, across a month rollover, until aborted", async () => {
    const root = tmp();
    const clock = manualClock("2026-01-31T23:59:00Z");
    const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
    await appendRequests(log, 2);
    const stop = new AbortController();
    const follower = followAudit({
      root,
      agent: "agent-alpha",
      afterSeq: log.head.seq,
      signal: stop.signal,
      pollIntervalMs: 50,
    });
    const seen: number[] = [];
    const done = (async () => {
      for await (const record of follower) {
        seen.push(record.entry.seq);
        if (record.entry.seq === 3) {
          clock.set("2026-02-01T00:00:00Z");
          await appendRequests(log, 2, 4);
        }
        if (record.entry.seq === 5) stop.abort();
      }
    })();
    // Entries up to the head (1-2) are history; the follower starts after them.
    await appendRequests(log, 1, 3);
    await done;
    await log.close();
    expect(seen).toEqual([3, 4, 5]);
  });

  it("replays from afterSeq and waits for an incomplete line to be completed", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    const stop = new AbortController();
    const seen: AuditRecord[] = [];
    const file = join(dir, "2026-03.jsonl");
    const log = await AuditLog.open({
      agent: "agent-alpha",
      root,
      clock: manualClock("2026-03-20T00:00:00Z").now,
    });
    const [tenth] = await appendRequests(log, 1, 10);
    await log.close();
    // Cut the last line in two: the follower must not yield it until its newline arrives.
    const text = readFileSync(file, "utf8");
    const lastLine = `${JSON.stringify(tenth)}\n`;
    writeFileSync(file, text.slice(0, text.length - lastLine.length + 20));
    for await (const record of followAudit({
      root,
      agent: "agent-alpha",
      afterSeq: 7,
      signal: stop.signal,
      pollIntervalMs: 50,
    })) {
      seen.push(record);
      if (record.entry.seq === 9) appendFileSync(file, lastLine.slice(20));
      if (record.entry.seq === 10) stop.abort();
    }
    expect(seen.map((r) => [r.entry.seq, r.line])).toEqual([
      [8, 2],
      [9, 3],
      [10, 4],
    ]);
    expect(seen[2]!.entry).toEqual(tenth);
  });

  it("waits for a log that does not exist yet and filters what it yields", async () => {
    const root = tmp();
    const stop = new AbortController();
    const seen: string[] = [];
    const following = (async () => {
      for await (const record of followAudit({
        root,
        agent: "agent-alpha",
        afterSeq: 0,
        type: "response",
        signal: stop.signal,
        pollIntervalMs: 20,
      })) {
        seen.push(String(record.entry.id));
        stop.abort();
      }
    })();
    const log = await AuditLog.open({ agent: "agent-alpha", root });
    await appendRequests(log, 2);
    await log.append(auditEntryFor(exampleResponse("req-2"), { direction: "received", channel: "c" }));
    await following;
    await log.close();
    expect(seen).toEqual(["req-2"]);
  });
});

describe("followAudit from the end", () => {
  it("skips what was logged before it started", async () => {
    const root = tmp();
    const log = await AuditLog.open({ agent: "agent-alpha", root });
    await appendRequests(log, 3);
    const stop = new AbortController();
    const follower = followAudit({ root, agent: "agent-alpha", signal: stop.signal, pollIntervalMs: 20 });
    // Keep logging until the follower yields: whatever it yields first must come after entry 3.
    const first = follower.next();
    let settled = false;
    void first.then(() => (settled = true));
    for (let id = 4; !settled; id++) {
      await appendRequests(log, 1, id);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const result = await first;
    stop.abort();
    await follower.return(undefined);
    await log.close();
    expect(result.done ? undefined : result.value.entry.seq).toBeGreaterThanOrEqual(4);
  });
});
