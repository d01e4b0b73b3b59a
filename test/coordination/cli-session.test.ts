import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { acpSession, startAcpSession } from "./helpers.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("acp session init", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("prints the id, the export line, or JSON", async () => {
    const root = tmp();
    const plain = await acpSession(root, ["init"]);
    expect(plain.code).toBe(0);
    expect(plain.stdout.trim()).toMatch(UUID);
    expect(existsSync(join(root, plain.stdout.trim(), "coordination.json"))).toBe(true);

    const exported = await acpSession(root, ["init", "--export"]);
    expect(exported.stdout).toMatch(/^export ACP_SESSION_ID=([0-9a-f-]{36}) CLAUDE_SESSION_ID=\1\n$/);
    const other = join(tmp(), "with space");
    const withRoot = await acpSession(root, ["init", "--export", "--root", other]);
    expect(withRoot.stdout).toMatch(
      new RegExp(
        `^export ACP_SESSION_ID=([0-9a-f-]{36}) CLAUDE_SESSION_ID=\\1 ACP_CONTEXT_DIR='${other}'\\n$`,
      ),
    );

    const json = await acpSession(root, [
      "init",
      "--json",
      "--project-type",
      "web_app",
      "--session",
      "a1b2c3d4-e5f6-7890-abcd-ef1234567890",
    ]);
    expect(JSON.parse(json.stdout)).toEqual({
      session_id: "a1b2c3d4-e5f6-7890-abcd-ef1234567890",
      root,
      dir: join(root, "a1b2c3d4-e5f6-7890-abcd-ef1234567890"),
    });
  });

  it("refuses a malformed or existing id", async () => {
    const root = tmp();
    const bad = await acpSession(root, ["init", "--session", "../ABC"]);
    expect(bad).toMatchObject({
      code: 1,
      stderr:
        "acp: session id: \"../ABC\" is not a usable session id (1-255 characters with no '/', '\\', '..' or control characters)\n",
    });
    const { id } = await Session.create({ root });
    const again = await acpSession(root, ["init", "--session", id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already exists/);
  });
});

describe("acp session status / update / failed", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("updates agents and shows them as a table, one agent, or JSON", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    expect(
      (
        await acpSession(
          root,
          ["update", "sec-analyzer", "--status", "in_progress", "--progress", "Starting analysis"],
          { env },
        )
      ).code,
    ).toBe(0);
    await acpSession(
      root,
      [
        "update",
        "skill-gen",
        "--status",
        "waiting",
        "--depends-on",
        "sec-analyzer, perf-analyzer",
        "--reason",
        "Waiting for analysis",
      ],
      { env },
    );
    const done = await acpSession(root, ["update", "sec-analyzer", "--status", "completed", "--json"], {
      env,
    });
    expect(JSON.parse(done.stdout)).toMatchObject({
      status: "completed",
      report_path: "reports/sec-analyzer.json",
    });

    const table = await acpSession(root, ["status"], { env });
    expect(table.stdout).toMatch(/^AGENT +STATUS +DETAIL\n/);
    expect(table.stdout).toMatch(
      /skill-gen +waiting +Waiting for analysis \(depends on sec-analyzer, perf-analyzer\)/,
    );
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
    await acpSession(root, ["update", "bad", "--status", "failed", "--error", "Failed to analyze X"], {
      env,
    });
    const human = await acpSession(root, ["failed"], { env });
    expect(human.stdout).toMatch(/^bad: failed\n(.|\n)*error: Failed to analyze X/);
    const json = JSON.parse((await acpSession(root, ["failed", "--json"], { env })).stdout);
    expect(json).toEqual([
      expect.objectContaining({ name: "bad", status: "failed", error: "Failed to analyze X" }),
    ]);
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
    expect(noSession.stderr).toMatch(
      /no session given: pass --session ID or set ACP_SESSION_ID or CLAUDE_SESSION_ID/,
    );
    const wrongRoot = await acpSession(root, ["status", "--root", tmp(), "--session", id]);
    expect(wrongRoot.stderr).toMatch(new RegExp(`no session ${id} here\n$`));
  });
});

describe("acp session wait", { timeout: 120_000 }, () => {
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
    expect(JSON.parse(timeout.stdout)).toEqual({
      outcome: "timeout",
      agents: [{ name: "ghost", status: "unknown" }],
    });
    expect(timeout.stderr).toMatch(/timed out after 0\.3s; still waiting for: ghost/);
    const nothing = await acpSession(root, ["wait"], { env });
    expect(nothing.stderr).toMatch(/name at least one agent, or give --suffix/);
  });
});
