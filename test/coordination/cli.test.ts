import { appendFileSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { acpSession, startAcpSession } from "./helpers.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("acp session init", () => {
  const tmp = useTmpDir();

  it("prints the id, the export line, or JSON", async () => {
    const root = tmp();
    const plain = await acpSession(root, ["init"]);
    expect(plain.code).toBe(0);
    expect(plain.stdout.trim()).toMatch(UUID);
    expect(existsSync(join(root, plain.stdout.trim(), "coordination.json"))).toBe(true);

    const exported = await acpSession(root, ["init", "--export"]);
    expect(exported.stdout).toMatch(/^export ACP_SESSION_ID=[0-9a-f-]{36}\n$/);
    const other = join(tmp(), "with space");
    const withRoot = await acpSession(root, ["init", "--export", "--root", other]);
    expect(withRoot.stdout).toMatch(new RegExp(`^export ACP_SESSION_ID=[0-9a-f-]{36} ACP_CONTEXT_DIR='${other}'\\n$`));

    const json = await acpSession(root, ["init", "--json", "--project-type", "web_app", "--session", "a1b2c3d4-e5f6-7890-abcd-ef1234567890"]);
    expect(JSON.parse(json.stdout)).toEqual({
      session_id: "a1b2c3d4-e5f6-7890-abcd-ef1234567890",
      root,
      dir: join(root, "a1b2c3d4-e5f6-7890-abcd-ef1234567890"),
    });
  });

  it("refuses a malformed or existing id", async () => {
    const root = tmp();
    const bad = await acpSession(root, ["init", "--session", "ABC"]);
    expect(bad).toMatchObject({ code: 1, stderr: 'acp: session id: "ABC" is not a lower-case UUID\n' });
    const { id } = await Session.create({ root });
    const again = await acpSession(root, ["init", "--session", id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already exists/);
  });
});

describe("acp session status / update / failed", () => {
  const tmp = useTmpDir();

  it("updates agents and shows them as a table, one agent, or JSON", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    expect((await acpSession(root, ["update", "sec-analyzer", "--status", "in_progress", "--progress", "Starting analysis"], { env })).code).toBe(0);
    await acpSession(root, ["update", "skill-gen", "--status", "waiting", "--depends-on", "sec-analyzer, perf-analyzer", "--reason", "Waiting for analysis"], { env });
    const done = await acpSession(root, ["update", "sec-analyzer", "--status", "completed", "--json"], { env });
    expect(JSON.parse(done.stdout)).toMatchObject({ status: "completed", report_path: "reports/sec-analyzer.json" });

    const table = await acpSession(root, ["status"], { env });
    expect(table.stdout).toMatch(/^AGENT +STATUS +DETAIL\n/);
    expect(table.stdout).toMatch(/skill-gen +waiting +Waiting for analysis \(depends on sec-analyzer, perf-analyzer\)/);
    const one = await acpSession(root, ["status", "sec-analyzer"], { env });
    expect(one.stdout).toMatch(/^sec-analyzer: completed\n {2}started_at: /);
    const completed = await acpSession(root, ["status", "--status", "completed", "--json"], { env });
    expect(Object.keys(JSON.parse(completed.stdout))).toEqual(["sec-analyzer"]);
    const waiting = await acpSession(root, ["status", "--status", "waiting", "--json"], { env });
    expect(JSON.parse(waiting.stdout)["skill-gen"].dependencies).toEqual(["sec-analyzer", "perf-analyzer"]);
    const unknown = await acpSession(root, ["status", "nobody"], { env });
    expect(unknown).toMatchObject({ code: 1 });
    expect(unknown.stderr).toMatch(/no agent "nobody"/);
  });

  it("lists failed agents with their error", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    const env = { CLAUDE_SESSION_ID: session.id };
    expect((await acpSession(root, ["failed"], { env })).stdout).toBe("no failed agents\n");
    await session.updateAgent("ok", { status: "completed" });
    await acpSession(root, ["update", "bad", "--status", "failed", "--error", "Failed to analyze X"], { env });
    const human = await acpSession(root, ["failed"], { env });
    expect(human.stdout).toMatch(/^bad: failed\n(.|\n)*error: Failed to analyze X/);
    const json = JSON.parse((await acpSession(root, ["failed", "--json"], { env })).stdout);
    expect(json).toEqual([expect.objectContaining({ name: "bad", status: "failed", error: "Failed to analyze X" })]);
  });

  it("rejects bad input with the option or field named", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const nothing = await acpSession(root, ["update", "a"], { env });
    expect(nothing.stderr).toMatch(/nothing to update: give --status/);
    const badStatus = await acpSession(root, ["update", "a", "--status", "done"], { env });
    expect(badStatus.code).not.toBe(0);
    expect(badStatus.stderr).toMatch(/option '--status <status>' argument 'done' is invalid/);
    const badName = await acpSession(root, ["update", "../x", "--progress", "p"], { env });
    expect(badName.stderr).toMatch(/agent: "..\/x" is not a valid agent name/);
    const noSession = await acpSession(root, ["status"]);
    expect(noSession).toMatchObject({ code: 1 });
    expect(noSession.stderr).toMatch(/no session given: pass --session ID or set ACP_SESSION_ID or CLAUDE_SESSION_ID/);
    const wrongRoot = await acpSession(root, ["status", "--root", tmp(), "--session", id]);
    expect(wrongRoot.stderr).toMatch(/coordination\.json missing/);
  });
});

describe("acp session log / events / timeline / counts", () => {
  const tmp = useTmpDir();

  it("logs every event type and filters them the way the seed's jq recipes do", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const logs = [
      ["log", "security", "status", "Starting security analysis"],
      ["log", "security", "finding", "--severity", "high", "--data", '{"title":"SQL Injection Risk","location":"src/db/queries.ts:42"}'],
      ["log", "perf", "finding", "Slow query", "--severity", "low"],
      ["log", "security", "data", "--artifact", "data/vulnerabilities.json", "--description", "Detailed vulnerability data"],
      ["log", "perf", "error", "Failed to analyze X", "--error", "Error details here"],
      ["log", "security", "completed", "Analysis complete. Found 5 high-severity issues."],
    ];
    for (const args of logs) expect((await acpSession(root, args, { env })).code, args.join(" ")).toBe(0);

    const all = await acpSession(root, ["events"], { env });
    expect(all.stdout.trim().split("\n")).toHaveLength(6);
    expect(all.stdout).toMatch(/ {4}2 {2}\S+ \[security\] finding\(high\): SQL Injection Risk\n/);
    expect(all.stdout).toMatch(/\[security\] data: Detailed vulnerability data → data\/vulnerabilities\.json/);
    const fromSecurity = JSON.parse((await acpSession(root, ["events", "--from", "security", "--json"], { env })).stdout);
    expect(fromSecurity).toHaveLength(4);
    const high = JSON.parse((await acpSession(root, ["events", "--type", "finding", "--severity", "high", "--json"], { env })).stdout);
    expect(high).toEqual([expect.objectContaining({ from: "security", data: { title: "SQL Injection Risk", location: "src/db/queries.ts:42" } })]);
    const errors = JSON.parse((await acpSession(root, ["events", "--type", "error", "--json"], { env })).stdout);
    expect(errors[0]).toMatchObject({ message: "Failed to analyze X", error: "Error details here" });

    const counts = JSON.parse((await acpSession(root, ["counts", "--json"], { env })).stdout);
    expect(counts).toEqual([
      { type: "completed", count: 1 },
      { type: "data", count: 1 },
      { type: "error", count: 1 },
      { type: "finding", count: 2 },
      { type: "status", count: 1 },
    ]);
    expect((await acpSession(root, ["counts", "--by", "from"], { env })).stdout).toBe("perf         2\nsecurity     4\n");
  });

  it("prints a timeline sorted by time, whatever the order in the file", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    await session.log({ from: "b", type: "status", message: "second", timestamp: "2025-01-23T10:02:00Z" });
    await session.log({ from: "a", type: "finding", severity: "high", data: { title: "first" }, timestamp: "2025-01-23T10:01:00Z" });
    await session.log({ from: "c", type: "data", artifact: "data/x.json", timestamp: "2025-01-23T10:03:00Z" });
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
    expect(noSeverity).toMatchObject({ code: 1, stderr: 'acp: event: severity: required field is missing (expected one of "high", "medium", "low")\n' });
    const badData = await acpSession(root, ["log", "a", "status", "x", "--data", "[1]"], { env });
    expect(badData.stderr).toBe("acp: --data: must be a JSON object\n");
    const badType = await acpSession(root, ["log", "a", "gossip", "x"], { env });
    expect(badType.stderr).toMatch(/value 'gossip' is invalid for argument 'type'/);

    await session.log({ from: "a", type: "status", message: "fine" });
    appendFileSync(session.paths.messages, '{"timestamp":"2025-01-23T10:00:00Z","fr');
    const torn = await acpSession(root, ["events"], { env });
    expect(torn.code).toBe(0);
    expect(torn.stdout).toMatch(/\[a\] status: fine/);
    expect(torn.stderr).toMatch(/^acp: warning: .*messages\.jsonl:2: torn line/);

    appendFileSync(session.paths.messages, '\n{"timestamp":"2025-01-23T10:00:00Z","from":"a","type":"status"}\n');
    const broken = await acpSession(root, ["counts"], { env });
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe("status       1\n");
    expect(broken.stderr).toMatch(/messages\.jsonl:3: message: required field is missing/);
    expect(broken.stderr).toMatch(/acp: 1 invalid line in messages\.jsonl/);
  });
});

describe("acp session report / artifact", () => {
  const tmp = useTmpDir();
  const report = (severity: string, extra: Record<string, unknown> = {}) => ({
    summary: `found a ${severity} issue`,
    findings: [{ type: "issue", severity, title: `${severity} thing`, location: "a.ts:1" }],
    metrics: { items_analyzed: 10 },
    data_artifacts: ["data/shared.json"],
    next_actions: [`fix the ${severity} thing`],
    recommendations_for_automation: [`Skill: ${severity} checker`],
    ...extra,
  });

  it("writes, shows, summarises, filters findings and aggregates reports", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const written = await acpSession(root, ["report", "write", "security-analyzer"], { env, input: JSON.stringify(report("high")) });
    expect(written).toMatchObject({ code: 0, stdout: "wrote reports/security-analyzer.json (1 findings)\n" });
    const file = join(tmp(), "perf.json");
    writeFileSync(file, JSON.stringify(report("low")));
    expect((await acpSession(root, ["report", "write", "perf-analyzer", file], { env })).code).toBe(0);
    await acpSession(root, ["report", "write", "skill-generator"], { env, input: JSON.stringify(report("medium")) });

    const shown = await acpSession(root, ["report", "show", "security-analyzer"], { env });
    expect(shown.stdout).toMatch(/^security-analyzer · completed · .*\n\nfound a high issue\n\nFindings \(1\):\n {2}\[high\] issue: high thing \(a\.ts:1\)/);
    const summaries = await acpSession(root, ["report", "summaries", "--suffix", "analyzer"], { env });
    expect(summaries.stdout).toBe("perf-analyzer: found a low issue\nsecurity-analyzer: found a high issue\n");
    const high = JSON.parse((await acpSession(root, ["report", "findings", "--severity", "high", "--json"], { env })).stdout);
    expect(high).toEqual([expect.objectContaining({ agent: "security-analyzer", title: "high thing" })]);
    const aggregate = JSON.parse((await acpSession(root, ["report", "aggregate", "--json"], { env })).stdout);
    expect(aggregate).toMatchObject({
      reports: 3,
      total_findings: 3,
      high_severity: 1,
      automation_opportunities: 3,
      data_artifacts: ["data/shared.json"],
      metrics: { items_analyzed: 30 },
    });
    const human = await acpSession(root, ["report", "aggregate", "--suffix", "analyzer"], { env });
    expect(human.stdout).toMatch(/^reports: +2\ntotal findings: +2 \(high 1, medium 0, low 1\)/);
  });

  it("names the file, line and field of a bad report", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const file = join(tmp(), "bad.json");
    writeFileSync(file, JSON.stringify(report("critical"), null, 2));
    const result = await acpSession(root, ["report", "write", "x", file, "--session", id]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`acp: ${file}:6: findings[0].severity: Invalid option: expected one of "high"|"medium"|"low"\n`);
    const syntax = await acpSession(root, ["report", "write", "x", "--session", id], { input: '{\n  "summary": "s",\n}' });
    expect(syntax.stderr).toMatch(/^acp: <stdin>:3: not valid JSON/);
    const missing = await acpSession(root, ["report", "show", "nobody", "--session", id]);
    expect(missing.stderr).toMatch(/agent "nobody" has written no report/);
  });

  it("puts, gets and lists artifacts", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const put = await acpSession(root, ["artifact", "put", "vulnerabilities", "--from", "security", "--description", "vulns"], {
      env,
      input: '{"vulnerabilities":[{"id":"SQL-001"}]}',
    });
    expect(put.stdout).toBe("data/vulnerabilities.json\n");
    const file = join(tmp(), "graph.json");
    writeFileSync(file, '{"nodes":[]}');
    await acpSession(root, ["artifact", "put", "data/dependency-graph.json", file], { env });
    const got = await acpSession(root, ["artifact", "get", "vulnerabilities.json"], { env });
    expect(JSON.parse(got.stdout)).toEqual({ vulnerabilities: [{ id: "SQL-001" }] });
    const list = await acpSession(root, ["artifact", "list"], { env });
    expect(list.stdout).toMatch(/^data\/dependency-graph\.json {2}\d+ B .*\ndata\/vulnerabilities\.json {2}\d+ B .* by security\n$/);
    const json = JSON.parse((await acpSession(root, ["artifact", "list", "--json"], { env })).stdout);
    expect(json.map((a: { name: string }) => a.name)).toEqual(["dependency-graph", "vulnerabilities"]);
    const notJson = await acpSession(root, ["artifact", "put", "x"], { env, input: "not json" });
    expect(notJson.stderr).toMatch(/^acp: <stdin>:1: not valid JSON/);
    const escape = await acpSession(root, ["artifact", "get", "../../etc/passwd"], { env });
    expect(escape.stderr).toMatch(/not a valid artifact name/);
  });
});

describe("acp session wait", () => {
  const tmp = useTmpDir();

  it("returns once the agents complete, exits 1 naming a failed one, and 124 on timeout", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    const env = { ACP_SESSION_ID: session.id };
    await session.updateAgent("a-analyzer", { status: "in_progress" });
    await session.updateAgent("b-analyzer", { status: "in_progress" });
    const waiting = startAcpSession(root, ["wait", "--suffix", "analyzer"], env);
    await waiting.until("stderr", /^waiting: a-analyzer: in_progress, b-analyzer: in_progress\n/);
    await session.updateAgent("a-analyzer", { status: "completed" });
    await session.updateAgent("b-analyzer", { status: "completed" });
    const done = await waiting.result;
    expect(done).toMatchObject({ code: 0, stdout: "completed: a-analyzer, b-analyzer\n" });

    await session.updateAgent("c", { status: "failed", error: "out of memory" });
    const failed = await acpSession(root, ["wait", "a-analyzer", "c"], { env });
    expect(failed).toMatchObject({ code: 1 });
    expect(failed.stderr).toMatch(/acp: failed: c \(out of memory\)\n$/);

    const timeout = await acpSession(root, ["wait", "ghost", "--timeout", "0.3", "--json"], { env });
    expect(timeout.code).toBe(124);
    expect(JSON.parse(timeout.stdout)).toEqual({ outcome: "timeout", agents: [{ name: "ghost", status: "unknown" }] });
    expect(timeout.stderr).toMatch(/timed out after 0\.3s; still waiting for: ghost/);
    const nothing = await acpSession(root, ["wait"], { env });
    expect(nothing.stderr).toMatch(/name at least one agent, or give --suffix/);
  });
});

describe("acp session run", () => {
  const tmp = useTmpDir();

  it("rejects a cycle before starting anything", async () => {
    const root = tmp();
    const plan = join(tmp(), "plan.yaml");
    writeFileSync(plan, "agents:\n  a:\n    command: 'touch started'\n    depends_on: [b]\n  b:\n    command: 'touch started'\n    depends_on: [a]\n");
    const result = await acpSession(root, ["run", plan]);
    expect(result).toMatchObject({ code: 1, stderr: `acp: ${plan}:4: agents.a.depends_on: dependency cycle: a → b → a\n` });
    expect(existsSync(root) ? readdirSync(root) : []).toEqual([]);
  });
});
