import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyAgentPatch } from "../../src/coordination/agent-patch.js";
import { Session, type SessionChange } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";

const ID = "a1b2c3d4-e5f6-7890-abcd-ef1234567890";

describe("Session", () => {
  const tmp = useTmpDir();

  it("creates the coordination protocol's layout and opens it again by id or from the environment", async () => {
    const root = tmp();
    const session = await Session.create({ root, projectType: "web_app", projectPath: "/src/app" });
    expect(session.id).toMatch(/^[0-9a-f-]{36}$/);
    for (const part of ["coordination.json", "messages.jsonl", "reports", "data"]) {
      expect(existsSync(join(root, session.id, part))).toBe(true);
    }
    expect(await session.readCoordination()).toMatchObject({
      session_id: session.id,
      project_type: "web_app",
      agents: {},
    });
    expect((await Session.open({ root, id: session.id })).paths.dir).toBe(session.paths.dir);
    const fromCoordinationVariable = await Session.fromEnvironment({
      env: { ACP_CONTEXT_DIR: root, CLAUDE_SESSION_ID: session.id },
    });
    expect(fromCoordinationVariable.id).toBe(session.id);
    // ACP_SESSION_ID wins over the coordination protocol's variable; --session wins over both.
    await expect(
      Session.fromEnvironment({
        env: { ACP_CONTEXT_DIR: root, ACP_SESSION_ID: ID, CLAUDE_SESSION_ID: session.id },
      }),
    ).rejects.toThrow(/no session a1b2c3d4/);
    expect(
      (
        await Session.fromEnvironment({
          session: session.id,
          env: { ACP_CONTEXT_DIR: root, ACP_SESSION_ID: ID },
        })
      ).id,
    ).toBe(session.id);
  });

  it("refuses unusable ids, duplicates, and a missing session", async () => {
    const root = tmp();
    await expect(Session.create({ root, id: "../abc123" })).rejects.toThrow(
      /"\.\.\/abc123" is not a usable session id/,
    );
    await Session.create({ root, id: ID });
    await expect(Session.create({ root, id: ID })).rejects.toThrow(/already exists/);
    mkdirSync(join(root, "b1b2c3d4-e5f6-7890-abcd-ef1234567890"));
    await expect(Session.open({ root, id: "b1b2c3d4-e5f6-7890-abcd-ef1234567890" })).rejects.toThrow(
      /coordination\.json missing/,
    );
    await expect(Session.fromEnvironment({ env: {} })).rejects.toThrow(/no session given/);
  });

  it("applies the coordination protocol's status rules when updating an agent", async () => {
    const session = await Session.create({ root: tmp() });
    const waiting = await session.updateAgent("gen", {
      status: "waiting",
      dependencies: ["a", "b"],
      reason: "Waiting for analysis",
    });
    expect(waiting).toEqual({ status: "waiting", dependencies: ["a", "b"], reason: "Waiting for analysis" });
    const running = await session.updateAgent("gen", {
      status: "in_progress",
      progress: "Starting analysis",
    });
    expect(running.started_at).toBeDefined();
    const done = await session.updateAgent("gen", { status: "completed", progress: "Analysis complete" });
    expect(done).toMatchObject({
      status: "completed",
      report_path: "reports/gen.json",
      started_at: running.started_at,
    });
    expect(Date.parse(done.completed_at!)).toBeGreaterThanOrEqual(Date.parse(running.started_at!));
    await expect(session.updateAgent("bad name", { status: "waiting" })).rejects.toThrow(
      /not a valid agent name/,
    );
    await expect(session.updateAgent("x", { dependencies: ["../y"] })).rejects.toThrow(
      /not a valid agent name/,
    );
    await expect(session.agent("nobody")).rejects.toThrow(/no agent "nobody"/);
  });

  it("clears a previous attempt's outcome when an agent starts again", () => {
    const failed = applyAgentPatch(
      undefined,
      "a",
      { status: "failed", error: "boom", exit_code: 3 },
      "2025-01-23T10:00:00Z",
    );
    expect(failed).toMatchObject({
      status: "failed",
      failed_at: "2025-01-23T10:00:00Z",
      error: "boom",
      exit_code: 3,
    });
    const again = applyAgentPatch(failed, "a", { status: "in_progress" }, "2025-01-23T10:01:00Z");
    expect(again).toEqual({ status: "in_progress", started_at: "2025-01-23T10:01:00Z", dependencies: [] });
  });

  for (const pollOnly of [false, true]) {
    it(`watch reports which parts changed (${pollOnly ? "polling" : "fs.watch"})`, async () => {
      const session = await Session.create({ root: tmp() });
      const seen = new Set<SessionChange>();
      const watcher = session.watch(
        (changes) => {
          for (const c of changes) seen.add(c);
        },
        {
          intervalMs: 20,
          pollOnly,
        },
      );
      await watcher.ready;
      const until = async (kind: SessionChange) => {
        while (!seen.has(kind)) await new Promise((r) => setTimeout(r, 10));
      };
      await session.updateAgent("a", { status: "in_progress" });
      await until("coordination");
      await session.log({ from: "a", type: "status", message: "hi" });
      await until("events");
      await session.writeReport("a", { summary: "s" });
      await until("reports");
      await session.putArtifact("x", {});
      await until("data");
      watcher.close();
      expect([...seen].sort()).toEqual(["coordination", "data", "events", "reports"]);
    });
  }

  it("waitFor returns when all complete, as soon as one fails, or on timeout", async () => {
    const session = await Session.create({ root: tmp() });
    await session.updateAgent("x-analyzer", { status: "in_progress" });
    await session.updateAgent("y-analyzer", { status: "waiting" });
    const progress: string[][] = [];
    let firstReport!: () => void;
    const reported = new Promise<void>((resolve) => (firstReport = resolve));
    const waiting = session.waitFor(
      { suffix: "analyzer" },
      {
        watch: { intervalMs: 20 },
        onProgress: (a) => {
          progress.push(a.map((x) => `${x.name}:${x.status}`));
          firstReport();
        },
      },
    );
    await reported; // its first reading, before anything changes
    await session.updateAgent("x-analyzer", { status: "completed" });
    await session.updateAgent("y-analyzer", { status: "completed" });
    expect((await waiting).outcome).toBe("completed");
    expect(progress[0]).toEqual(["x-analyzer:in_progress", "y-analyzer:waiting"]);
    expect(progress.at(-1)).toEqual(["x-analyzer:completed", "y-analyzer:completed"]);

    await session.updateAgent("z", { status: "in_progress" });
    const failing = session.waitFor({ agents: ["z", "never-registered"] }, { watch: { intervalMs: 20 } });
    await session.updateAgent("z", { status: "failed", error: "disk full" });
    expect(await failing).toEqual({
      outcome: "failed",
      agents: [
        { name: "z", status: "failed", error: "disk full" },
        { name: "never-registered", status: "unknown" },
      ],
    });

    const timedOut = await session.waitFor(
      { agents: ["never-registered"] },
      { timeoutMs: 50, watch: { intervalMs: 20 } },
    );
    expect(timedOut.outcome).toBe("timeout");
    const none = await session.waitFor({ suffix: "generator" }, { timeoutMs: 50 });
    expect(none).toEqual({ outcome: "timeout", agents: [] });
    await expect(session.waitFor({})).rejects.toThrow(/name at least one agent/);
  });
});
