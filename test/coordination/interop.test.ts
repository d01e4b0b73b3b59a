/**
 * Sessions made and used the coordination protocol's own way (plain `mkdir`, `echo >>`, `jq … > tmp
 * && mv`), and the recovery hints and problem lists around them.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { loadPlan, runPlan, Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { acpSession, writePlan } from "./helpers.js";

/** The protocol's recipes are bash (`mkdir -p …/{reports,data}` needs brace expansion). */
const bash = (script: string, cwd: string) => execFileSync("bash", ["-c", script], { cwd, encoding: "utf8" });

describe("a session made the protocol's way", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("is adopted: coordination.json is created, the events already logged are kept", async () => {
    const project = tmp();
    // The protocol's example session, verbatim: its id is abc123, not a UUID.
    bash(
      `SESSION_ID="abc123"
mkdir -p ".claude/agents/context/\${SESSION_ID}"/{reports,data}
echo "{\\"timestamp\\":\\"2025-01-23T10:00:00Z\\",\\"from\\":\\"security\\",\\"type\\":\\"status\\",\\"message\\":\\"Starting\\"}" >> .claude/agents/context/\${SESSION_ID}/messages.jsonl`,
      project,
    );
    const dir = join(project, ".claude/agents/context/abc123");
    // No --root and no ACP_CONTEXT_DIR: the protocol's own path is the default.
    const env = { ACP_CONTEXT_DIR: "", CLAUDE_SESSION_ID: "abc123" };
    const status = await acpSession("", ["status", "--json"], { env, cwd: project });
    expect(status, status.stderr).toMatchObject({ code: 0, stdout: "{}\n" });
    const coordination = JSON.parse(readFileSync(join(dir, "coordination.json"), "utf8"));
    expect(coordination).toEqual({ session_id: "abc123", started_at: "2025-01-23T10:00:00Z", agents: {} });
    const events = await acpSession("", ["events", "--json"], { env, cwd: project });
    expect(JSON.parse(events.stdout)).toEqual([
      { timestamp: "2025-01-23T10:00:00Z", from: "security", type: "status", message: "Starting" },
    ]);

    // The protocol's jq update works on the adopted file, and we read what it wrote.
    bash(
      `cat ${dir}/coordination.json | jq '.agents["my-agent"] = {"status": "in_progress", "dependencies": []}' > ${dir}/.coord.tmp && mv ${dir}/.coord.tmp ${dir}/coordination.json`,
      project,
    );
    const one = await acpSession("", ["status", "my-agent", "--json"], { env, cwd: project });
    expect(JSON.parse(one.stdout)).toMatchObject({ status: "in_progress" });
  });

  it("init adopts a hand-made directory but refuses one that already is a session", async () => {
    const root = tmp();
    mkdirSync(join(root, "abc123", "reports"), { recursive: true });
    writeFileSync(join(root, "abc123", "reports", "kept.json"), "{}");
    const init = await acpSession(root, ["init", "--session", "abc123", "--project-type", "web_app"]);
    expect(init, init.stderr).toMatchObject({ code: 0, stdout: "abc123\n" });
    expect(readFileSync(join(root, "abc123", "reports", "kept.json"), "utf8")).toBe("{}");
    expect(existsSync(join(root, "abc123", "data"))).toBe(true);
    expect(JSON.parse(readFileSync(join(root, "abc123", "coordination.json"), "utf8"))).toMatchObject({
      session_id: "abc123",
      project_type: "web_app",
    });
    const again = await acpSession(root, ["init", "--session", "abc123"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/session abc123 already exists/);
  });

  it("accepts any id that stays one path segment, and nothing else", async () => {
    const root = tmp();
    for (const id of ["abc123", "ABC", "run 7", "2025-01-23.nightly"]) {
      expect((await Session.create({ root, id })).id).toBe(id);
    }
    for (const id of ["", ".", "..", "../escape", "a/b", "a\\b", "x..y", "nul\u0000id", "tab\tid"]) {
      await expect(Session.create({ root, id }), JSON.stringify(id)).rejects.toThrow(
        /is not a usable session id/,
      );
    }
    await expect(Session.open({ root, id: "missing" })).rejects.toThrow(/no session missing here/);
  });

  it("init --export sets the protocol's CLAUDE_SESSION_ID too", async () => {
    const root = tmp();
    const exported = await acpSession(root, ["init", "--export", "--session", "abc123"]);
    expect(exported.stdout).toBe("export ACP_SESSION_ID=abc123 CLAUDE_SESSION_ID=abc123\n");
  });
});

describe("status changes clear stale fields", () => {
  const tmp = useTmpDir();

  it("drops reason and progress of the previous status", async () => {
    const session = await Session.create({ root: tmp() });
    await session.updateAgent("a", { status: "waiting", reason: "retrying after: exited with code 1" });
    await session.updateAgent("a", { status: "in_progress", progress: "working 50%" });
    const done = await session.updateAgent("a", { status: "completed" });
    expect(done.reason).toBeUndefined();
    expect(done.progress).toBeUndefined();
    const withText = await session.updateAgent("b", { status: "completed", progress: "Analysis complete" });
    expect(withText.progress).toBe("Analysis complete");
    const same = await session.updateAgent("b", { status: "completed" });
    expect(same.progress).toBe("Analysis complete");
  });
});

describe("reports: every problem, and one bad report does not hide the others", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("report write --json lists all problems; the human form names each on its own line", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const bad = JSON.stringify(
      { summary: 3, findings: [{ type: "issue", severity: "critical", title: "" }] },
      null,
      2,
    );
    const json = await acpSession(root, ["report", "write", "x", "--session", id, "--json"], { input: bad });
    expect(json.code).toBe(1);
    const out = JSON.parse(json.stdout);
    expect(out.problems.map((p: { field: string }) => p.field)).toEqual([
      "summary",
      "findings[0].severity",
      "findings[0].title",
    ]);
    expect(out.problems[1]).toMatchObject({ file: "<stdin>", line: 6 });
    const human = await acpSession(root, ["report", "write", "x", "--session", id], { input: bad });
    expect(human.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^acp: <stdin>:2: summary: /),
      expect.stringMatching(/^acp: <stdin>:6: findings\[0\]\.severity: /),
      expect.stringMatching(/^acp: <stdin>:7: findings\[0\]\.title: /),
    ]);
  });

  it("aggregate and summaries skip a bad report with a warning naming file and field", async () => {
    const root = tmp();
    const session = await Session.create({ root });
    await session.writeReport("good-analyzer", { summary: "fine", findings: [] });
    writeFileSync(join(session.paths.reports, "broken-analyzer.json"), '{"agent_name":"broken-analyzer"}');
    const env = { ACP_SESSION_ID: session.id };
    const summaries = await acpSession(root, ["report", "summaries"], { env });
    expect(summaries).toMatchObject({ code: 0, stdout: "good-analyzer: fine\n" });
    expect(summaries.stderr).toMatch(
      /^acp: warning: skipped a report: .*reports\/broken-analyzer\.json:1: timestamp: required field is missing/,
    );
    const aggregate = await acpSession(root, ["report", "aggregate", "--json"], { env });
    expect(aggregate.code).toBe(0);
    expect(JSON.parse(aggregate.stdout)).toMatchObject({ reports: 1 });
    expect(aggregate.stderr).toContain("broken-analyzer.json");
  });
});

/** The protocol's "Writing Reports" recipe, verbatim: the quoted 'EOF' leaves $(date …) unexpanded. */
const HEREDOC_REPORT_RECIPE = `cat > .claude/agents/context/\${SESSION_ID}/reports/my-agent.json << 'EOF'
{
  "agent_name": "my-agent",
  "timestamp": "'$(date -u +%Y-%m-%dT%H:%M:%SZ)'",
  "status": "completed",
  "summary": "Your summary here",
  "findings": [
    {
      "type": "issue",
      "severity": "high",
      "title": "Finding title",
      "description": "Detailed description",
      "location": "src/file.ts:42",
      "recommendation": "How to fix"
    }
  ],
  "metrics": {
    "items_analyzed": 100,
    "issues_found": 3
  },
  "next_actions": ["Action 1", "Action 2"],
  "recommendations_for_automation": ["Suggestion 1", "Suggestion 2"]
}
EOF`;

describe("a report written with the protocol's heredoc recipe", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  async function recipeSession() {
    const project = tmp();
    bash(
      `SESSION_ID="abc123"\nmkdir -p ".claude/agents/context/\${SESSION_ID}"/{reports,data}\n${HEREDOC_REPORT_RECIPE}`,
      project,
    );
    const root = join(project, ".claude/agents/context");
    const file = join(root, "abc123", "reports", "my-agent.json");
    // What the shell really wrote: the substitution, never run.
    expect(JSON.parse(readFileSync(file, "utf8")).timestamp).toBe("'$(date -u +%Y-%m-%dT%H:%M:%SZ)'");
    const modified = new Date("2025-01-23T10:05:00Z");
    utimesSync(file, modified, modified);
    return { root, file, env: { ACP_SESSION_ID: "abc123" }, time: modified.toISOString() };
  }

  it("is read with the file's modification time, and the timestamp is flagged", async () => {
    const { root, file, env, time } = await recipeSession();
    const show = await acpSession(root, ["report", "show", "my-agent", "--json"], { env });
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({
      agent_name: "my-agent",
      timestamp: time,
      summary: "Your summary here",
    });
    expect(show.stderr).toBe(
      `acp: warning: ${file}: timestamp: is the shell's unexpanded $(date …), which a quoted heredoc leaves as text; read as the file's modification time, ${time}\n`,
    );
    const summaries = await acpSession(root, ["report", "summaries"], { env });
    expect(summaries).toMatchObject({ code: 0, stdout: "my-agent: Your summary here\n" });
    expect(summaries.stderr).toMatch(/^acp: warning: .*my-agent\.json: timestamp: is the shell's unexpanded/);
    expect(summaries.stderr).not.toContain("skipped");
    const findings = await acpSession(root, ["report", "findings", "--json"], { env });
    expect(JSON.parse(findings.stdout)).toMatchObject([{ agent: "my-agent", title: "Finding title" }]);

    const session = await Session.open({ root, id: "abc123" });
    const [read] = await session.readReports();
    expect(read).toMatchObject({
      agent: "my-agent",
      report: { timestamp: time },
      warnings: [{ field: "timestamp" }],
    });
    // Reading repairs nothing on disk: the file is the agent's.
    expect(JSON.parse(readFileSync(file, "utf8")).timestamp).toBe("'$(date -u +%Y-%m-%dT%H:%M:%SZ)'");
  });

  it("any other bad timestamp is still refused", async () => {
    const { root, file, env } = await recipeSession();
    for (const bad of ["yesterday", "$(date) and more", "'$(rm -rf /)'", "`date -u`"]) {
      writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), timestamp: bad }));
      const show = await acpSession(root, ["report", "show", "my-agent"], { env });
      expect(show.code, bad).toBe(1);
      expect(show.stderr, bad).toMatch(/timestamp: must be an ISO 8601 timestamp/);
    }
  });
});

describe("partial results and process groups in a run", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("a failed agent's partial report is named by the run and by `session failed`", async () => {
    const root = tmp();
    const report =
      '{"agent_name":"scanner","timestamp":"2025-01-23T10:05:00Z","status":"partial","summary":"scanned 2 of 5 modules"}';
    const plan = writePlan(tmp(), {
      defaults: { critical: false },
      agents: {
        scanner: {
          command: `echo '${report}' > "$ACP_CONTEXT_DIR/$ACP_SESSION_ID/reports/$ACP_AGENT_NAME.json"; exit 3`,
        },
      },
    });
    const run = await acpSession(root, ["run", plan, "--session", "nightly"]);
    expect(run.stdout).toContain(
      "scanner: failed (exited with code 3); partial results in reports/scanner.json: scanned 2 of 5 modules\n",
    );
    expect(run.stderr).toContain("partial results in reports/scanner.json");
    const failed = await acpSession(root, ["failed", "--session", "nightly"]);
    expect(failed.stdout).toContain(
      "partial results: reports/scanner.json (partial): scanned 2 of 5 modules",
    );
    const json = JSON.parse((await acpSession(root, ["failed", "--session", "nightly", "--json"])).stdout);
    expect(json[0]).toMatchObject({
      name: "scanner",
      partial_report: { path: "reports/scanner.json", status: "partial" },
    });
  });

  it("ends the agent's whole process group when it exits", async () => {
    const dir = tmp();
    const pidFile = join(dir, "sleep.pid");
    const session = await Session.create({ root: join(dir, "context") });
    const plan = await loadPlan(
      writePlan(dir, {
        agents: { leaky: { command: `sleep 47 & echo $! > ${pidFile}; exit 1` } },
      }),
    );
    const result = await runPlan(plan, session, { killGraceMs: 1000 });
    expect(result.agents[0]).toMatchObject({ status: "failed", exitCode: 1 });
    const pid = Number(readFileSync(pidFile, "utf8"));
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      await vi.waitFor(() => expect(alive()).toBe(false), { timeout: 3000, interval: 50 });
    } finally {
      if (alive()) process.kill(pid, "SIGKILL");
    }
  });
});
