import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useTmpDir } from "../helpers/tmp.js";
import { acpSession, scriptedAgent, writePlan } from "./helpers.js";

describe("acp session run", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();

  it("runs a diamond plan, printing a line per transition, and exits 0", { timeout: 60_000 }, async () => {
    const root = tmp();
    const plan = writePlan(tmp(), {
      max_parallel: 2,
      agents: {
        top: scriptedAgent(),
        left: scriptedAgent([], { depends_on: ["top"] }),
        right: scriptedAgent([], { depends_on: ["top"] }),
        bottom: scriptedAgent([], { depends_on: ["left", "right"] }),
      },
    });
    const result = await acpSession(root, ["run", plan], { timeoutMs: 60_000 });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(
      /^top: completed\nleft: completed\nright: completed\nbottom: completed\nsession [0-9a-f-]{36}\n$/,
    );
    const lines = result.stderr.trim().split("\n");
    expect(lines[0]).toMatch(/^session [0-9a-f-]{36} \(/);
    const transitions = lines.slice(1).map((l) => l.replace(/^\[\+\d+\.\ds\] /, ""));
    expect(transitions.filter((t) => t.startsWith("bottom:"))).toEqual([
      "bottom: waiting",
      "bottom: in_progress (attempt 1 of 1)",
      "bottom: completed",
    ]);
    expect(transitions.indexOf("bottom: in_progress (attempt 1 of 1)")).toBeGreaterThan(
      transitions.indexOf("left: completed"),
    );
    const [id] = readdirSync(root);
    const json = await acpSession(root, ["status", "--json", "--session", id!]);
    expect(Object.values(JSON.parse(json.stdout)).map((a) => (a as { status: string }).status)).toEqual([
      "completed",
      "completed",
      "completed",
      "completed",
    ]);
  });

  it("exits 1 when a critical agent fails, naming it, with --json giving the outcome", {
    timeout: 60_000,
  }, async () => {
    const root = tmp();
    const plan = writePlan(tmp(), {
      agents: {
        broken: scriptedAgent(["--fail-attempts", "9", "--exit", "4", "--stderr", "kaput\n"]),
        next: scriptedAgent([], { depends_on: ["broken"] }),
      },
    });
    const result = await acpSession(root, ["run", plan, "--json"], { timeoutMs: 60_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/broken: failed \(exited with code 4\)/);
    expect(result.stderr).toMatch(
      /acp: run stopped: critical agent broken failed \(see `acp session failed --session [0-9a-f-]{36}`\)\n$/,
    );
    expect(JSON.parse(result.stdout)).toMatchObject({
      ok: false,
      stoppedBy: "broken",
      agents: [
        { name: "broken", status: "failed", exitCode: 4, stderrTail: "kaput" },
        { name: "next", status: "not_started" },
      ],
    });
  });

  it("names the plan file and field of a schema error", async () => {
    const plan = writePlan(tmp(), "agents:\n  a:\n    command: x\n    retries: many\n");
    const result = await acpSession(tmp(), ["run", plan]);
    expect(result).toMatchObject({
      code: 1,
      stderr: `acp: ${plan}:4: agents.a.retries: Invalid input: expected number, received string\n`,
    });
    const missing = await acpSession(tmp(), ["run", "/no/plan.yaml"]);
    expect(missing.stderr).toBe("acp: /no/plan.yaml: cannot read plan (ENOENT)\n");
  });

  it("rejects a cycle before starting anything", async () => {
    const root = tmp();
    const plan = join(tmp(), "plan.yaml");
    writeFileSync(
      plan,
      "agents:\n  a:\n    command: 'touch started'\n    depends_on: [b]\n  b:\n    command: 'touch started'\n    depends_on: [a]\n",
    );
    const result = await acpSession(root, ["run", plan]);
    expect(result).toMatchObject({
      code: 1,
      stderr: `acp: ${plan}:4: agents.a.depends_on: dependency cycle: a → b → a\n`,
    });
    expect(existsSync(root) ? readdirSync(root) : []).toEqual([]);
  });
});
