/**
 * The dashboard's index of the relay audit log, on real log files and a real SQLite file: every
 * query answers what reading the logs entry by entry answers (the feed's newest page for the admin,
 * a principal, one agent, one pair, one type; the volume chart's counts per bucket, from rollups
 * and from the window's partial ends; a message's entries), across month files; and a log that is
 * rewritten under it is indexed again.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { type AuditEntry, AuditLog, readAudit } from "../../src/audit/index.js";
import { FeedIndex } from "../../src/extensions/dashboard/feed-index.js";
import { FEED_TYPES, type FeedType } from "../../src/extensions/dashboard/feed-index-schema.js";
import {
  countByBucket,
  type EntryQuery,
  entriesOfMessage,
  hasMessage,
  newestEntries,
  type Visibility,
} from "../../src/extensions/dashboard/feed-queries.js";
import { eventually } from "../broker/support.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-feed-index-");
const HOUR = 3_600_000;
/** Three days across a month boundary, so agents have two log files each. */
const START = Date.parse("2026-03-30T00:00:00Z");
const AGENTS = ["a0", "a1", "a2", "b0", "b1", "c0"];
const principalOf = (agent: string) => `p-${agent[0]}`;
/** More agents of one principal than its walks take one by one. */
const MANY = Array.from({ length: 40 }, (_, i) => `m${i}`);
const TYPES: FeedType[] = ["request", "response", "notification", "handoff"];

interface Written {
  root: string;
  entries: AuditEntry[];
}

/**
 * Relayed messages between the agents (by default 400, 11 minutes apart), through AuditLog (the
 * relay's writer); every `toSelfEvery`th an agent's message to itself. With `more`, the same
 * traffic goes on in its logs.
 */
async function writeLogs(
  agents: readonly string[] = AGENTS,
  messages = 400,
  apartMs = 11 * 60_000,
  toSelfEvery = Number.POSITIVE_INFINITY,
  more?: Written,
): Promise<Written> {
  const root = more?.root ?? join(tmp(), "relay-audit");
  const entries = more?.entries ?? [];
  let now = entries.length > 0 ? Date.parse((entries.at(-1) as AuditEntry).ts) : START;
  const logs = new Map<string, AuditLog>();
  const end = entries.length + messages;
  for (let i = entries.length; i < end; i++) {
    now += apartMs + (i % 7) * 1000;
    const from = agents[i % agents.length] as string;
    const to = i % toSelfEvery === 0 ? from : (agents[(i * 7 + 1) % agents.length] as string);
    let log = logs.get(from);
    if (!log) {
      log = await AuditLog.open({ root, agent: from, clock: () => new Date(now) });
      logs.set(from, log);
    }
    const type = TYPES[i % 4] as FeedType;
    entries.push(
      await log.append({
        direction: "sent",
        from: { agent: from, principal: principalOf(from) },
        to: { agent: to, principal: principalOf(to) },
        type,
        method: type === "handoff" ? "agent.handoff" : "tasks.send",
        id: type === "notification" ? null : `rpc-${i}`,
        messageId: `m-${i}`,
        summary: `${from} to ${to}, number ${i}`,
        channel: "acp",
      }),
    );
  }
  for (const log of logs.values()) await log.close();
  return { root, entries };
}

/** Puts an index file back as the earlier layout made it: the walks on (party, at) alone, user_version 0. */
function toEarlierLayout(file: string): void {
  const db = new Database(file);
  db.exec(`
    DROP INDEX entries_sent; DROP INDEX entries_received;
    CREATE INDEX entries_by_sender ON entries (sender, at);
    CREATE INDEX entries_by_recipient ON entries (recipient, at);
    PRAGMA user_version = 0;`);
  db.close();
}

const opened: FeedIndex[] = [];
afterEach(() => {
  for (const index of opened.splice(0)) index.close();
});

async function indexOf(root: string): Promise<FeedIndex> {
  const errors: unknown[] = [];
  const index = await FeedIndex.open(root, `${root}-index.db`, (err) => errors.push(err));
  opened.push(index);
  index.start();
  return index;
}

const indexed = (index: FeedIndex) =>
  (index.db.prepare("SELECT count(*) AS n FROM entries").get() as { n: number }).n;

/** What a viewer sees, found by reading every entry (newest first). */
function expected(entries: AuditEntry[], visibility: Visibility, query: EntryQuery): AuditEntry[] {
  const sees = (agent: string) => !visibility.agents || visibility.agents.has(agent);
  return entries
    .filter((e) => sees(e.from.agent) || sees(e.to.agent))
    .filter((e) => query.type === undefined || e.type === query.type)
    .filter((e) => {
      const parties = [e.from.agent, e.to.agent];
      if (query.agent !== undefined && query.peer !== undefined)
        return (
          (e.from.agent === query.agent && e.to.agent === query.peer) ||
          (e.from.agent === query.peer && e.to.agent === query.agent)
        );
      return [query.agent ?? query.peer].every((party) => party === undefined || parties.includes(party));
    })
    .filter((e) => Date.parse(e.ts) >= query.since && Date.parse(e.ts) <= query.until)
    .reverse();
}

const everything = { since: 0, until: Number.MAX_SAFE_INTEGER };
const DENSE = [[...AGENTS, ...MANY], 600, 17_000, 13] as const;
const principal = (p: string): Visibility => ({
  principal: p,
  agents: new Set([...AGENTS, ...MANY].filter((a) => principalOf(a) === p)),
});

/** The feed's newest page for every kind of viewer and filter, as reading every entry gives it. */
function expectPagesRead(index: FeedIndex, entries: AuditEntry[]): void {
  const cases: [Visibility, EntryQuery][] = [
    [{}, everything],
    [{}, { ...everything, type: "handoff" }],
    [{}, { ...everything, agent: "b1" }],
    [{}, { ...everything, agent: "a0", peer: "b1" }],
    [principal("p-a"), everything],
    [principal("p-a"), { ...everything, agent: "c0" }],
    [principal("p-b"), { ...everything, type: "request" }],
    [{}, { since: START + 24 * HOUR, until: START + 30 * HOUR }],
    [principal("p-c"), { ...everything, agent: "a1", peer: "a2" }],
  ];
  for (const [visibility, query] of cases) {
    const want = expected(entries, visibility, query).slice(0, 25);
    const got = index.read(newestEntries(index, visibility, query, 25));
    expect(
      got.map((record) => record?.entry.messageId),
      JSON.stringify(query),
    ).toEqual(want.map((e) => e.messageId));
  }
}

/**
 * The volume's counts over a window whose two ends are partial hours, for every kind of walk, as
 * counting the entries one by one gives them (`entries`: DENSE traffic from START).
 */
function expectPartialEndsCounted(index: FeedIndex, entries: AuditEntry[]): void {
  const between = (since: number, until: number) =>
    entries.filter((e) => Date.parse(e.ts) >= since && Date.parse(e.ts) <= until);
  const since = START + 7 * 60_000 + 3_000;
  const until = START + 2 * HOUR + 41 * 60_000 + 5_000;
  const slotEdges = [since, START + HOUR - 1, START + 2 * HOUR, until];
  expect(between(slotEdges[0]!, slotEdges[1]!).length).toBeGreaterThan(0);
  expect(between(slotEdges[2]!, slotEdges[3]!).length).toBeGreaterThan(0);
  expect(between(since, START + 10 * 60_000 - 1).length).toBeGreaterThan(0);
  expect(between(START + 2 * HOUR + 40 * 60_000, until).length).toBeGreaterThan(0);
  // Hour buckets, 5-minute buckets, and buckets starting after the window does (what precedes them is not counted).
  for (const [bucketMs, first] of [
    [HOUR, START],
    [5 * 60_000, START + 5 * 60_000],
    [HOUR, START + HOUR],
  ] as const) {
    const buckets = Math.floor((until - first) / bucketMs) + 1;
    for (const [visibility, query] of [
      [{}, { since, until }],
      [{}, { since, until, type: "handoff" }],
      [principal("p-a"), { since, until }],
      [principal("p-m"), { since, until }],
      [principal("p-m"), { since, until, type: "request" }],
      [principal("p-b"), { since, until, agent: "b1" }],
      [principal("p-b"), { since, until, agent: "a0" }],
      [{}, { since, until, agent: "m3" }],
      [{}, { since, until, agent: "a1", peer: "a2" }],
      [principal("p-m"), { since, until, agent: "m1", peer: "m2" }],
      [{}, { since, until, agent: "a0" }],
      [principal("p-a"), { since, until, agent: "a0" }],
      [principal("p-b"), { since, until, agent: "a0", type: "request" }],
      [{}, { since, until, agent: "a0", peer: "a0" }],
      [principal("p-a"), { since, until, agent: "a0", peer: "a0" }],
    ] as [Visibility, EntryQuery][]) {
      const want = Array.from({ length: buckets }, () => FEED_TYPES.map(() => 0));
      for (const e of expected(entries, visibility, query)) {
        const row = want[Math.floor((Date.parse(e.ts) - first) / bucketMs)];
        if (row) row[FEED_TYPES.indexOf(e.type as FeedType)]!++;
      }
      expect(
        countByBucket(index, visibility, query, first, bucketMs, buckets),
        `${bucketMs} ${visibility.principal} ${JSON.stringify(query)}`,
      ).toEqual(want);
    }
  }
}

describe("the relay audit index", () => {
  it("answers the feed's pages as reading every entry does, for every kind of viewer and filter", async () => {
    const { root, entries } = await writeLogs();
    const index = await indexOf(root);
    await eventually(async () => expect(indexed(index)).toBe(entries.length));

    expectPagesRead(index, entries);
    // The entries came from both months' files.
    const files = new Set(index.read(newestEntries(index, {}, everything, 400)).map((r) => r?.file));
    expect(files.size).toBe(AGENTS.length * 2);
  });

  it("counts per bucket as reading every entry does: whole slots from the rollups, partial ends entry by entry", async () => {
    const { root, entries } = await writeLogs();
    const index = await indexOf(root);
    await eventually(async () => expect(indexed(index)).toBe(entries.length));

    // Hour buckets from an odd minute: the rollups answer the whole hours, the two ends are counted.
    const since = START + 7 * 60_000;
    const until = START + 70 * HOUR + 13 * 60_000;
    const first = Math.floor(since / HOUR) * HOUR;
    const buckets = Math.floor((until - first) / HOUR) + 1;
    for (const [visibility, query] of [
      [{}, { since, until }],
      [principal("p-b"), { since, until }],
      [{}, { since, until, agent: "a2" }],
      [principal("p-a"), { since, until, type: "response" }],
      [{}, { since, until, agent: "a0", peer: "c0" }],
    ] as [Visibility, EntryQuery][]) {
      const want = Array.from({ length: buckets }, () => FEED_TYPES.map(() => 0));
      for (const e of expected(entries, visibility, query)) {
        const row = want[Math.floor((Date.parse(e.ts) - first) / HOUR)] as number[];
        row[FEED_TYPES.indexOf(e.type as FeedType)]!++;
      }
      expect(countByBucket(index, visibility, query, first, HOUR, buckets), JSON.stringify(query)).toEqual(
        want,
      );
    }
  });

  it("counts the window's partial ends as reading every entry does, each entry once, over every kind of walk", async () => {
    // Dense traffic (a message every ~20 s) so both ends of every window hold entries, a principal
    // with more agents than it walks one by one (the time walk, filtered by its agents), and
    // messages an agent sent itself.
    const { root, entries } = await writeLogs(...DENSE);
    const index = await indexOf(root);
    await eventually(async () => expect(indexed(index)).toBe(entries.length));
    // An exchange between two of one principal's agents, which its walks meet twice.
    expect(entries.some((e) => e.from.agent === "a0" && e.to.agent === "a1")).toBe(true);
    expect(entries.some((e) => e.from.principal === "p-m" && e.to.principal === "p-m")).toBe(true);
    // And between one of them and another principal's agent, both ways.
    expect(entries.some((e) => e.from.agent === "a2" && e.to.principal !== "p-a")).toBe(true);
    expect(entries.some((e) => e.to.agent === "a2" && e.from.principal !== "p-a")).toBe(true);
    expect(entries.some((e) => e.from.agent === "a0" && e.to.agent === "a0")).toBe(true);

    expectPartialEndsCounted(index, entries);
  });

  it("gives a file made before the walks' present indexes those indexes after start, answering the same meanwhile", async () => {
    const written = await writeLogs(...DENSE);
    const file = `${written.root}-index.db`;
    // The file as the earlier layout made it: the walks on (party, at) alone, user_version 0.
    const made = await indexOf(written.root);
    await eventually(async () => expect(indexed(made)).toBe(written.entries.length));
    made.close();
    toEarlierLayout(file);
    // The gateway ran on after the file was last written.
    const { entries } = await writeLogs(DENSE[0], 100, DENSE[2], DENSE[3], written);

    const errors: unknown[] = [];
    const notes: string[] = [];
    const index = await FeedIndex.open(
      written.root,
      file,
      (err) => errors.push(err),
      (_, message) => notes.push(message),
    );
    opened.push(index);
    const walkIndexes = () =>
      (index.db.prepare("PRAGMA index_list(entries)").all() as { name: string }[])
        .map((row) => row.name)
        .filter((name) => /^entries_(by_sender|by_recipient|sent|received)$/.test(name))
        .sort();
    // Opened, the file is as it was: the walks take the earlier indexes.
    expect(walkIndexes()).toEqual(["entries_by_recipient", "entries_by_sender"]);
    expect(index.walkIndexes.sender).toBe("entries_by_sender");
    const before = written.entries.slice(0, 600);
    expectPartialEndsCounted(index, before);
    expectPagesRead(index, before);

    index.start();
    // Nothing is written while the thread builds: what the logs gained waits.
    index.changed("a0");
    index.catchUpChanged();
    expect(indexed(index)).toBe(600);
    await eventually(async () => expect(walkIndexes()).toEqual(["entries_received", "entries_sent"]));
    expect(index.walkIndexes.sender).toBe("entries_sent");
    await eventually(async () => expect(indexed(index)).toBe(entries.length));
    expect(index.db.prepare("PRAGMA user_version").get()).toEqual({ user_version: 1 });
    expectPartialEndsCounted(index, entries);
    expectPagesRead(index, entries);
    expect(notes).toEqual([
      expect.stringContaining("building its sender and recipient indexes"),
      "relay audit index: indexes built",
    ]);
    expect(errors).toEqual([]);

    // Stopped between its two transactions, an upgrade leaves the earlier indexes: dropped at open.
    index.close();
    const stopped = new Database(file);
    stopped.exec("CREATE INDEX entries_by_sender ON entries (sender, at)");
    stopped.close();
    const reopened = await indexOf(written.root);
    expect(reopened.walkIndexes.sender).toBe("entries_sent");
    expect(
      reopened.db.prepare("SELECT name FROM sqlite_master WHERE name = 'entries_by_sender'").get(),
    ).toBeUndefined();
    expectPartialEndsCounted(reopened, entries);

    // A gateway stopped during the build: no error, and the next start builds them.
    reopened.close();
    toEarlierLayout(file);
    const stoppedErrors: unknown[] = [];
    const interrupted = await FeedIndex.open(written.root, file, (err) => stoppedErrors.push(err));
    interrupted.start();
    interrupted.close();
    const again = await indexOf(written.root);
    await eventually(async () => expect(again.walkIndexes.sender).toBe("entries_sent"));
    expectPartialEndsCounted(again, entries);
    expect(stoppedErrors).toEqual([]);
  });

  it("finds a message's entries by its sender and id, and no one else's", async () => {
    const { root, entries } = await writeLogs();
    const index = await indexOf(root);
    await eventually(async () => expect(indexed(index)).toBe(entries.length));
    const target = entries[123] as AuditEntry;
    const found = index.read(entriesOfMessage(index, target.from.agent, target.messageId as string));
    expect(found.map((r) => r?.entry)).toEqual([target]);
    expect(entriesOfMessage(index, target.to.agent, target.messageId as string)).toEqual([]);
    expect(hasMessage(index, target.from.agent, target.messageId as string)).toBe(true);
    expect(hasMessage(index, "nobody", target.messageId as string)).toBe(false);
  });

  it("indexes a log again when it was rewritten under it, and its counts follow", async () => {
    const { root, entries } = await writeLogs();
    const index = await indexOf(root);
    await eventually(async () => expect(indexed(index)).toBe(entries.length));
    // a0's April log loses its last entries (restored from an older backup, say).
    const file = join(root, "a0", "2026-04.jsonl");
    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
    const kept = lines.slice(0, 5);
    writeFileSync(file, `${kept.join("\n")}\n`);
    const remaining: AuditEntry[] = [];
    for await (const record of readAudit({ root })) remaining.push(record.entry);
    expect(remaining.length).toBe(entries.length - (lines.length - kept.length));

    index.changed("a0");
    index.catchUpChanged();
    await eventually(async () => expect(indexed(index)).toBe(remaining.length));
    remaining.sort((x, y) => Date.parse(x.ts) - Date.parse(y.ts));
    const got = index.read(newestEntries(index, {}, { ...everything, agent: "a0" }, 400));
    expect(got.map((r) => r?.entry.messageId)).toEqual(
      expected(remaining, {}, { ...everything, agent: "a0" }).map((e) => e.messageId),
    );
    const total = countByBucket(index, {}, everything, 0, Number.MAX_SAFE_INTEGER, 1)[0] as number[];
    expect(total.reduce((a, b) => a + b, 0)).toBe(remaining.length);
  });
});
