import { appendFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { acpSession, startAcpSession } from "./helpers.js";

describe("acp session log / events / timeline / counts", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("logs every event type and filters them the way the coordination protocol's jq recipes do", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const logs = [
      ["log", "security", "status", "Starting security analysis"],
      [
        "log",
        "security",
        "finding",
        "--severity",
        "high",
        "--data",
        '{"title":"SQL Injection Risk","location":"src/db/queries.ts:42"}',
      ],
      ["log", "perf", "finding", "Slow query", "--severity", "low"],
      [
        "log",
        "security",
        "data",
        "--artifact",
        "data/vulnerabilities.json",
        "--description",
        "Detailed vulnerability data",
      ],
      ["log", "perf", "error", "Failed to analyze X", "--error", "Error details here"],
      ["log", "security", "completed", "Analysis complete. Found 5 high-severity issues."],
    ];
    for (const args of logs) expect((await acpSession(root, args, { env })).code, args.join(" ")).toBe(0);

    const all = await acpSession(root, ["events"], { env });
    expect(all.stdout.trim().split("\n")).toHaveLength(6);
    expect(all.stdout).toMatch(/ {4}2 {2}\S+ \[security\] finding\(high\): SQL Injection Risk\n/);
    expect(all.stdout).toMatch(
      /\[security\] data: Detailed vulnerability data → data\/vulnerabilities\.json/,
    );
    const fromSecurity = JSON.parse(
      (await acpSession(root, ["events", "--from", "security", "--json"], { env })).stdout,
    );
    expect(fromSecurity).toHaveLength(4);
    const high = JSON.parse(
      (await acpSession(root, ["events", "--type", "finding", "--severity", "high", "--json"], { env }))
        .stdout,
    );
    expect(high).toEqual([
      expect.objectContaining({
        from: "security",
        data: { title: "SQL Injection Risk", location: "src/db/queries.ts:42" },
      }),
    ]);
    const errors = JSON.parse(
      (await acpSession(root, ["events", "--type", "error", "--json"], { env })).stdout,
    );
    expect(errors[0]).toMatchObject({ message: "Failed to analyze X", error: "Error details here" });

    const counts = JSON.parse((await acpSession(root, ["counts", "--json"], { env })).stdout);
    expect(counts).toEqual([
      { type: "completed", count: 1 },
      { type: "data", count: 1 },
      { type: "error", count: 1 },
      { type: "finding", count: 2 },
      { type: "status", count: 1 },
    ]);
    expect((await acpSession(root, ["counts", "--by", "from"], { env })).stdout).toBe(
      "perf         2\nsecurity     4\n",
    );
  });

  it("prints a timeline sorted by time, whatever the order in the file", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    await session.log({ from: "b", type: "status", message: "second", timestamp: "2025-01-23T10:02:00Z" });
    await session.log({
      from: "a",
      type: "finding",
      severity: "high",
      data: { title: "first" },
      timestamp: "2025-01-23T10:01:00Z",
    });
    await session.log({
      from: "c",
      type: "data",
      artifact: "data/x.json",
      timestamp: "2025-01-23T10:03:00Z",
    });
    const { stdout } = await acpSession(root, ["timeline", "--session", session.id]);
    expect(stdout).toBe(
      "2025-01-23T10:01:00Z [a] finding: first\n2025-01-23T10:02:00Z [b] status: second\n2025-01-23T10:03:00Z [c] data: data/x.json\n",
    );
  });

  it("rejects an invalid event, warns of a torn line, and fails on a hand-broken line", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    const env = { ACP_SESSION_ID: session.id };
    const noSeverity = await acpSession(root, ["log", "a", "finding", "x"], { env });
    expect(noSeverity).toMatchObject({
      code: 1,
      stderr: 'acp: event: severity: required field is missing (expected one of "high", "medium", "low")\n',
    });
    const badData = await acpSession(root, ["log", "a", "status", "x", "--data", "[1]"], { env });
    expect(badData.stderr).toBe("acp: --data: must be a JSON object\n");
    const misplaced = await acpSession(root, ["log", "a", "status", "x", "--severity", "high"], { env });
    expect(misplaced.stderr).toBe("acp: --severity: only for type finding\n");
    const badType = await acpSession(root, ["log", "a", "gossip", "x"], { env });
    expect(badType.stderr).toMatch(/value 'gossip' is invalid for argument 'type'/);

    await session.log({ from: "a", type: "status", message: "fine" });
    appendFileSync(session.paths.messages, '{"timestamp":"2025-01-23T10:00:00Z","fr');
    const torn = await acpSession(root, ["events"], { env });
    expect(torn.code).toBe(0);
    expect(torn.stdout).toMatch(/\[a\] status: fine/);
    expect(torn.stderr).toMatch(/^acp: warning: .*messages\.jsonl:2: torn line/);

    appendFileSync(
      session.paths.messages,
      '\n{"timestamp":"2025-01-23T10:00:00Z","from":"a","type":"status"}\n',
    );
    const broken = await acpSession(root, ["counts"], { env });
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe("status       1\n");
    expect(broken.stderr).toMatch(/messages\.jsonl:3: message: required field is missing/);
    expect(broken.stderr).toMatch(/acp: 1 invalid line in messages\.jsonl/);
  });
});

describe("acp session events --follow / status --watch", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("follows new events live until interrupted, one JSON object per line with --json", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    await session.log({ from: "a", type: "status", message: "before" });
    const human = startAcpSession(root, ["events", "--follow", "--type", "finding"], {
      ACP_SESSION_ID: session.id,
    });
    const json = startAcpSession(root, ["events", "--follow", "--json"], { ACP_SESSION_ID: session.id });
    await json.until("stdout", /"before"/);
    await session.log({ from: "a", type: "status", message: "not a finding" });
    await session.log({ from: "b", type: "finding", severity: "medium", message: "live one" });
    await human.until("stdout", /live one/);
    await json.until("stdout", /live one/);
    human.child.kill("SIGINT");
    json.child.kill("SIGINT");
    const [h, j] = await Promise.all([human.result, json.result]);
    expect(h).toMatchObject({ code: 0 });
    expect(h.stdout).toMatch(/^ {4}3 {2}\S+ \[b\] finding\(medium\): live one\n$/);
    expect(
      j.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).message),
    ).toEqual(["before", "not a finding", "live one"]);
  });

  it("redraws the agent table whenever coordination.json changes", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    await session.updateAgent("a", { status: "in_progress" });
    const watching = startAcpSession(root, ["status", "--watch"], { ACP_SESSION_ID: session.id });
    await watching.until("stdout", /a +in_progress/);
    await session.updateAgent("a", { status: "completed", progress: "all done" });
    await watching.until("stdout", /a +completed +all done/);
    watching.child.kill("SIGTERM");
    expect((await watching.result).code).toBe(0);
  });
});
