import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parsePlan, runPlan, Session, type Transition } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { scriptedAgent } from "./helpers.js";

/** Runs a plan (given as an object, written as YAML's JSON subset) in a fresh session. */
async function run(
  root: string,
  plan: Record<string, unknown>,
  options: { maxParallel?: number; signal?: AbortSignal } = {},
) {
  const session = await Session.create({ root });
  const transitions: Transition[] = [];
  const result = await runPlan(parsePlan(JSON.stringify(plan), `${root}/plan.yaml`), session, {
    ...options,
    onTransition: (t) => transitions.push(t),
    killGraceMs: 500,
  });
  return { session, result, transitions, coordination: await session.readCoordination() };
}

const ms = (iso: string | undefined) => Date.parse(iso ?? "");

describe("the coordinator", () => {
  const tmp = useTmpDir();

  it("runs a diamond: the top first, both sides in parallel, the bottom last", {
    timeout: 60_000,
  }, async () => {
    const { session, result, coordination } = await run(tmp(), {
      agents: {
        top: scriptedAgent(),
        left: scriptedAgent(["--await-running", "right"], { depends_on: ["top"] }),
        right: scriptedAgent(["--await-running", "left"], { depends_on: ["top"] }),
        bottom: scriptedAgent([], { depends_on: ["left", "right"] }),
      },
    });
    expect(result.ok).toBe(true);
    expect(result.agents.map((a) => [a.name, a.status, a.attempts])).toEqual([
      ["top", "completed", 1],
      ["left", "completed", 1],
      ["right", "completed", 1],
      ["bottom", "completed", 1],
    ]);
    const { top, left, right, bottom } = coordination.agents;
    expect(ms(left?.started_at)).toBeGreaterThanOrEqual(ms(top?.completed_at));
    expect(ms(right?.started_at)).toBeGreaterThanOrEqual(ms(top?.completed_at));
    expect(ms(bottom?.started_at)).toBeGreaterThanOrEqual(
      Math.max(ms(left?.completed_at), ms(right?.completed_at)),
    );
    expect(bottom).toMatchObject({ dependencies: ["left", "right"], report_path: "reports/bottom.json" });
    // Each agent found the session through its environment and wrote its report there.
    expect((await session.readReports()).map((r) => r.agent)).toEqual(["bottom", "left", "right", "top"]);
    const launches = (await session.readEvents({ from: "coordinator" })).events.map((e) => e.event.message);
    expect(launches[0]).toMatch(/^run of .*plan\.yaml started$/);
    expect(launches.at(-1)).toBe("run finished: 4 completed, 0 failed, 0 not started");
  });

  it("retries a failing agent and records the failed attempt", { timeout: 60_000 }, async () => {
    const { session, result, coordination, transitions } = await run(tmp(), {
      agents: {
        flaky: scriptedAgent(["--fail-attempts", "1", "--exit", "3", "--stderr", "transient glitch\n"], {
          retries: 2,
        }),
      },
    });
    expect(result.ok).toBe(true);
    expect(result.agents[0]).toMatchObject({ status: "completed", attempts: 2 });
    expect(coordination.agents["flaky"]).toMatchObject({ status: "completed", attempts: 2 });
    expect(coordination.agents["flaky"]?.error).toBeUndefined();
    expect(transitions.map((t) => `${t.status}:${t.attempt}`)).toEqual([
      "waiting:0",
      "in_progress:1",
      "waiting:1",
      "in_progress:2",
      "completed:2",
    ]);
    const errors = (await session.readEvents({ type: "error" })).events.map((e) => e.event);
    expect(errors).toEqual([
      expect.objectContaining({
        from: "coordinator",
        message: "flaky failed on attempt 1 of 3: exited with code 3",
        error: "transient glitch",
      }),
    ]);
  });

  it("marks an agent that dies without reporting failed, with exit code and stderr tail, and stops", {
    timeout: 60_000,
  }, async () => {
    const { result, coordination } = await run(tmp(), {
      agents: {
        broken: scriptedAgent(
          ["--fail-attempts", "99", "--exit", "2", "--stderr", "line 1\nboom: disk on fire\n"],
          { retries: 1 },
        ),
        after: scriptedAgent([], { depends_on: ["broken"] }),
      },
    });
    expect(result).toMatchObject({ ok: false, stoppedBy: "broken" });
    expect(coordination.agents["broken"]).toMatchObject({
      status: "failed",
      attempts: 2,
      exit_code: 2,
      error: "exited with code 2",
      stderr_tail: "line 1\nboom: disk on fire",
    });
    expect(coordination.agents["after"]).toMatchObject({
      status: "waiting",
      reason: "not started: critical agent broken failed",
    });
    expect(result.agents[1]).toMatchObject({ name: "after", status: "not_started" });
  });

  it("continues without a non-critical agent", { timeout: 60_000 }, async () => {
    const { result, coordination } = await run(tmp(), {
      agents: {
        optional: scriptedAgent(["--fail-attempts", "99"], { critical: false }),
        final: scriptedAgent([], { depends_on: ["optional"] }),
      },
    });
    expect(result.ok).toBe(true);
    expect(coordination.agents["optional"]?.status).toBe("failed");
    expect(coordination.agents["final"]?.status).toBe("completed");
  });

  it("never runs more than --max-parallel agents at once", { timeout: 60_000 }, async () => {
    const { result } = await run(
      tmp(),
      {
        agents: {
          a: scriptedAgent(["--alone"]),
          b: scriptedAgent(["--alone"]),
          c: scriptedAgent(["--alone"]),
        },
      },
      { maxParallel: 1 },
    );
    expect(result.agents.map((a) => a.status)).toEqual(["completed", "completed", "completed"]);
  });

  it("fails agents that time out, report failure themselves, or cannot start", {
    timeout: 60_000,
  }, async () => {
    const { result, coordination } = await run(tmp(), {
      defaults: { critical: false },
      agents: {
        slow: scriptedAgent(["--sleep", "30000"], { timeout_seconds: 0.5 }),
        honest: scriptedAgent(["--self-fail"]),
        missing: { command: ["/no/such/program"] },
      },
    });
    expect(result.ok).toBe(true);
    expect(coordination.agents["slow"]).toMatchObject({
      status: "failed",
      error: "timed out after 0.5s",
      signal: "SIGTERM",
    });
    expect(coordination.agents["honest"]).toMatchObject({
      status: "failed",
      error: "agent reported failure: self-reported problem",
    });
    expect(coordination.agents["missing"]?.error).toMatch(
      /^could not start: spawn \/no\/such\/program ENOENT/,
    );
  });

  it("stops running agents when interrupted", { timeout: 60_000 }, async () => {
    const controller = new AbortController();
    const root = tmp();
    const running = run(
      root,
      {
        agents: {
          long: scriptedAgent(["--sleep", "30000"]),
          next: scriptedAgent([], { depends_on: ["long"] }),
        },
      },
      { signal: controller.signal },
    );
    // Interrupt once the agent has announced itself.
    const announced = () => {
      const [id] = readdirSync(root);
      const log = id === undefined ? "" : join(root, id, "messages.jsonl");
      return existsSync(log) && readFileSync(log, "utf8").includes("started attempt 1");
    };
    while (!announced()) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    const { result, coordination } = await running;
    expect(result).toMatchObject({ ok: false, stoppedBy: "interrupted" });
    expect(coordination.agents["long"]).toMatchObject({ status: "failed", error: "interrupted" });
    expect(coordination.agents["next"]?.reason).toBe("not started: the run was interrupted");
  });

  it("resumes a session: completed agents are not run again", { timeout: 60_000 }, async () => {
    const root = tmp();
    const first = await run(root, {
      agents: {
        done: scriptedAgent(),
        broken: scriptedAgent(["--fail-attempts", "99"], { depends_on: ["done"] }),
      },
    });
    expect(first.result.ok).toBe(false);
    const fixed = parsePlan(
      JSON.stringify({
        agents: { done: scriptedAgent(), broken: scriptedAgent([], { depends_on: ["done"] }) },
      }),
      `${root}/plan.yaml`,
    );
    const second = await runPlan(fixed, first.session);
    expect(second.ok).toBe(true);
    expect(second.agents.map((a) => [a.name, a.status, a.attempts])).toEqual([
      ["done", "completed", 0],
      ["broken", "completed", 1],
    ]);
  });
});
