import { describe, expect, it } from "vitest";
import { CoordinationError, findCycle, parsePlan } from "../../src/coordination/index.js";

function rejection(text: string): CoordinationError {
  try {
    parsePlan(text, "plan.yaml");
  } catch (err) {
    expect(err).toBeInstanceOf(CoordinationError);
    return err as CoordinationError;
  }
  throw new Error("the plan was accepted");
}

describe("plans", () => {
  it("applies defaults and orders agents after their dependencies", () => {
    const plan = parsePlan(
      `name: analysis
max_parallel: 3
defaults:
  retries: 2
agents:
  report:
    command: ./report.sh
    depends_on: [security, performance]
  security:
    command: [node, security.js]
    critical: false
  performance:
    command: node perf.js
    retries: 0
    timeout_seconds: 1.5
    env: { DEPTH: "3" }
`,
      "/work/plans/plan.yaml",
    );
    expect(plan.maxParallel).toBe(3);
    expect(plan.order.indexOf("report")).toBe(2);
    expect(plan.agents.find((a) => a.name === "security")).toMatchObject({
      critical: false,
      retries: 2,
      cwd: "/work/plans",
    });
    expect(plan.agents.find((a) => a.name === "performance")).toMatchObject({
      critical: true,
      retries: 0,
      timeoutMs: 1500,
      env: { DEPTH: "3" },
    });
  });

  const cases: [string, string, RegExp][] = [
    [
      "YAML syntax",
      "agents:\n  a:\n    command: [x\n  b: 1\n",
      /^plan\.yaml:4: not valid YAML: Flow sequence/,
    ],
    [
      "a missing command",
      "agents:\n  a:\n    depends_on: []\n",
      /^plan\.yaml:3: agents\.a\.command: required field is missing/,
    ],
    [
      "a misspelt field",
      "agents:\n  a:\n    command: x\n    depend_on: [b]\n",
      /^plan\.yaml:3: agents\.a: unknown field\(s\): depend_on/,
    ],
    [
      "negative retries",
      "agents:\n  a:\n    command: x\n    retries: -1\n",
      /^plan\.yaml:4: agents\.a\.retries: Too small/,
    ],
    ["no agents", "agents: {}\n", /^plan\.yaml:1: agents: a plan needs at least one agent/],
    ["a bad agent name", "agents:\n  a/b:\n    command: x\n", /agents\.a\/b: invalid name/],
    [
      "an unknown dependency",
      "agents:\n  b:\n    command: x\n  a:\n    command: x\n    depends_on:\n      - b\n      - ghost\n",
      /^plan\.yaml:8: agents\.a\.depends_on\[1\]: unknown agent "ghost"/,
    ],
    [
      "a cycle",
      "agents:\n  a:\n    command: x\n    depends_on: [c]\n  b:\n    command: x\n    depends_on: [a]\n  c:\n    command: x\n    depends_on: [b]\n",
      /^plan\.yaml:4: agents\.a\.depends_on: dependency cycle: a → c → b → a/,
    ],
    [
      "an agent depending on itself",
      "agents:\n  a:\n    command: x\n    depends_on: [a]\n",
      /dependency cycle: a → a/,
    ],
  ];
  for (const [what, text, message] of cases) {
    it(`rejects ${what}, naming file, line and field`, () => {
      expect(rejection(text).message).toMatch(message);
    });
  }

  it("finds cycles only where there are some", () => {
    expect(findCycle({ a: [], b: ["a"], c: ["a"], d: ["b", "c"] })).toBeUndefined();
    expect(findCycle({ a: ["b"], b: ["a"] })).toEqual(["a", "b", "a"]);
  });
});
