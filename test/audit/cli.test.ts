import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AuditLog, auditEntryFor } from "../../src/audit/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";
import {
  appendRequests,
  manualClock,
  readLinesOf,
  exampleRequest,
  exampleResponse,
  threeMonthLog,
  writeLinesTo,
} from "./fixtures.js";

const tmp = useTmpDir("acp-audit-cli-");
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});

/** alpha's view of one exchange with beta (Feb), an encrypted request (Mar), plus a log for agent-beta. */
async function exchangeLog(root: string): Promise<void> {
  const clock = manualClock("2026-02-14T14:30:00Z");
  const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
  await appendRequests(log, 1);
  clock.set("2026-02-14T14:30:05Z");
  await log.append(
    auditEntryFor(exampleResponse("req-1"), {
      direction: "received",
      channel: "c",
      self: { principal: "principal-a" },
    }),
  );
  clock.set("2026-03-01T08:00:00Z");
  const encrypted = {
    ...exampleRequest("req-2"),
    params: { ...exampleRequest().params, body: { jwe: "a.b.c.d.e" } },
  };
  await log.append(
    auditEntryFor(encrypted, { direction: "sent", channel: "c", summary: "\u001b[31mred\u001b[0m" }),
  );
  await log.close();
}

describe("acp audit verify", () => {
  it("exits 0 for an intact log and names its head", async () => {
    const root = tmp();
    await threeMonthLog(root);
    const result = await runAcp(["audit", "verify", "--root", root]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^agent-alpha: intact, 9 entries in 3 month files; head seq 9, hash [0-9a-f]{64}\n$/,
    );
  });

  it("finds the root in $ACP_AUDIT_DIR and prints JSON with --json", async () => {
    const root = tmp();
    await threeMonthLog(root);
    const result = await runAcp(["audit", "verify", "--json"], { env: { ACP_AUDIT_DIR: root } });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      ok: true,
      root,
      agents: [{ agent: "agent-alpha", ok: true, entries: 9, files: 3 }],
    });
  });

  it("exits 1 naming the first broken line", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    const file = join(dir, "2026-02.jsonl");
    const lines = readLinesOf(file);
    writeLinesTo(file, [lines[0]!, lines[1]!.replace("agent-beta", "agent-eve")]);
    const result = await runAcp(["audit", "verify", "--root", root, "--agent", "agent-alpha"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`agent-alpha: BROKEN at ${file} line 2: hash-mismatch:`);
    expect(result.stderr).toBe(`acp: audit log broken at ${file} line 2: hash-mismatch\n`);
    const json = await runAcp(["audit", "verify", "--root", root, "--json"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout).agents[0].problem).toMatchObject({
      reason: "hash-mismatch",
      file,
      line: 2,
    });
  });

  it("exits 1 naming a missing month file", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    const { rmSync } = await import("node:fs");
    rmSync(join(dir, "2026-02.jsonl"));
    const result = await runAcp(["audit", "verify", "--root", root]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("2026-02.jsonl was deleted");
    expect(result.stderr).toContain(`${join(dir, "2026-03.jsonl")} line 1: missing-month`);
  });

  it("notes a torn last line without calling the log broken", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    appendFileSync(join(dir, "2026-03.jsonl"), '{"seq":10,"ts"');
    const result = await runAcp(["audit", "verify", "--root", root]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      `note: ${join(dir, "2026-03.jsonl")} line 4 is an incomplete line (14 bytes)`,
    );
  });

  it("exits 1 when there is nothing to verify", async () => {
    const root = tmp();
    expect(await runAcp(["audit", "verify", "--root", root])).toMatchObject({
      code: 1,
      stderr: `acp: no audit logs under ${root}\n`,
    });
    expect(await runAcp(["audit", "verify", "--root", root, "--agent", "agent-zeta"])).toMatchObject({
      code: 1,
      stderr: `acp: no audit log at ${join(root, "agent-zeta")}\n`,
    });
    expect((await runAcp(["audit", "verify", "--root", root, "--agent", "../x"])).stderr).toContain(
      'acp: agent id "../x" must be',
    );
  });
});

describe("acp audit show", () => {
  it("prints a readable timeline: time, arrow, peer, kind, summary", async () => {
    const root = tmp();
    await exchangeLog(root);
    const result = await runAcp(["audit", "show", "--root", root, "--agent", "agent-alpha"]);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^2026-02-14 14:30:00Z {2}→ agent-beta \(principal-b\) +request +agent-alpha asked agent-beta for get-availability \(date_range/,
    );
    expect(lines[1]).toMatch(
      /^2026-02-14 14:30:05Z {2}← agent-beta \(principal-b\) +response +agent-beta answered agent-alpha's request/,
    );
    expect(lines[2]).toMatch(
      /→ agent-beta +request +\[encrypted\] agent-alpha sent agent-beta an end-to-end encrypted request;/,
    );
    expect(result.stdout).not.toContain("\u001b");
  });

  it("filters by --since, --until, --peer and --type, and merges agents when none is named", async () => {
    const root = tmp();
    await exchangeLog(root);
    const since = await runAcp(["audit", "show", "--root", root, "--since", "2026-03-01"]);
    expect(since.stdout.trimEnd().split("\n")).toHaveLength(1);
    expect(since.stdout).toMatch(/^2026-03-01 08:00:00Z {2}agent-alpha → agent-beta/);
    const until = await runAcp(["audit", "show", "--root", root, "--until", "2026-02-14T14:30:00Z"]);
    expect(until.stdout.trimEnd().split("\n")).toHaveLength(1);
    const type = await runAcp(["audit", "show", "--root", root, "--type", "response", "--json"]);
    expect(JSON.parse(type.stdout).map((r: { entry: { id: string } }) => r.entry.id)).toEqual(["req-1"]);
    const peer = await runAcp(["audit", "show", "--root", root, "--peer", "agent-nobody"]);
    expect(peer).toMatchObject({ code: 0, stdout: "" });
  });

  it("prints JSON records with --json", async () => {
    const root = tmp();
    const dir = await threeMonthLog(root);
    const result = await runAcp(["audit", "show", "--root", root, "--agent", "agent-alpha", "--json"]);
    const records = JSON.parse(result.stdout);
    expect(records).toHaveLength(9);
    expect(records[8]).toMatchObject({
      agent: "agent-alpha",
      file: join(dir, "2026-03.jsonl"),
      line: 3,
      entry: { seq: 9 },
    });
  });

  it("rejects a bad date, a bad type and an unknown agent with the option's name", async () => {
    const root = tmp();
    await threeMonthLog(root);
    const badDate = await runAcp(["audit", "show", "--root", root, "--since", "last tuesday"]);
    expect(badDate.code).toBe(1);
    expect(badDate.stderr).toContain(
      "acp: --since: expected an ISO 8601 date (2026-02-01, 2026-02-01T09:00:00Z) or a duration ago",
    );
    expect(badDate.stderr).toContain('got "last tuesday"');
    const badType = await runAcp(["audit", "show", "--root", root, "--type", "gossip"]);
    expect(badType.stderr).toBe(
      'acp: --type: expected one of request, response, notification, handoff, command, got "gossip"\n',
    );
    const unknown = await runAcp(["audit", "show", "--root", root, "--agent", "agent-zeta"]);
    expect(unknown.stderr).toBe(`acp: no audit log for agent agent-zeta under ${root}\n`);
    const empty = tmp();
    expect(await runAcp(["audit", "show", "--root", empty])).toMatchObject({
      code: 1,
      stderr: `acp: no audit logs under ${empty}\n`,
    });
  });

  it("accepts a relative --since", async () => {
    const root = tmp();
    const log = await AuditLog.open({ agent: "agent-alpha", root });
    await appendRequests(log, 2);
    await log.close();
    const recent = await runAcp(["audit", "show", "--root", root, "--since", "1h", "--json"]);
    expect(JSON.parse(recent.stdout)).toHaveLength(2);
  });
});

describe("acp audit tail", () => {
  it("prints the last entries, and needs --agent when the root holds several", async () => {
    const root = tmp();
    await threeMonthLog(root);
    const result = await runAcp(["audit", "tail", "-n", "2", "--root", root, "--json"]);
    expect(
      result.stdout
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line).entry.seq),
    ).toEqual([8, 9]);
    const beta = await AuditLog.open({ agent: "agent-beta", root });
    await beta.close();
    const several = await runAcp(["audit", "tail", "--root", root]);
    expect(several.stderr).toBe(
      `acp: --agent: ${root} holds several agents' logs (agent-alpha, agent-beta); name one\n`,
    );
    const badCount = await runAcp(["audit", "tail", "--root", root, "--agent", "agent-alpha", "-n", "ten"]);
    expect(badCount.stderr).toBe('acp: --lines: expected a non-negative integer, got "ten"\n');
  });

  it("follows the log live with -f, across a month rollover, until interrupted", async () => {
    const root = tmp();
    const clock = manualClock("2026-01-31T23:59:00Z");
    const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
    await appendRequests(log, 3);
    const child = spawn(process.execPath, [CLI_PATH, "audit", "tail", "-f", "-n", "1", "--root", root], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    const waitFor = async (text: string): Promise<void> => {
      while (!stdout.includes(text)) {
        if (child.exitCode !== null) throw new Error(`tail exited early: ${stdout}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    await waitFor("2026-01-31 23:59:00Z");
    expect(stdout.trimEnd().split("\n")).toHaveLength(1);

    await log.append(
      auditEntryFor(exampleRequest("req-live"), { direction: "sent", channel: "c", summary: "Live one" }),
    );
    await waitFor("Live one");
    clock.set("2026-02-01T00:00:30Z");
    await log.append(
      auditEntryFor(exampleRequest("req-feb"), { direction: "sent", channel: "c", summary: "Next month" }),
    );
    await waitFor("Next month");
    await log.close();

    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(
      stdout
        .trimEnd()
        .split("\n")
        .map((line) => line.slice(0, 20)),
    ).toEqual(["2026-01-31 23:59:00Z", "2026-01-31 23:59:00Z", "2026-02-01 00:00:30Z"]);
  });
});
