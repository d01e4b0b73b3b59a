import { describe, expect, it } from "vitest";
import { aggregators, CommandError, failureReason, serveMetrics } from "../../src/orchestration/index.js";
import { delay, orchestrator, recording } from "./helpers.js";

describe("send (request-response) with in-process agents", () => {
  it("delivers the command and returns the agent's AgentResponse, audited both ways", async () => {
    const { orch, audit } = orchestrator();
    const agent = recording((command) => ({
      data: { file: command.parameters.file, complexity: 3 },
      summary: "ok",
    }));
    orch.addAgent({ id: "code-agent", handler: agent });
    const command = orch.command({
      to: "code-agent",
      action: "ANALYZE",
      parameters: { file: "src/main.ts" },
    });
    const response = await orch.send(command);
    expect(response).toMatchObject({
      commandId: command.id,
      version: "2.0",
      from: "code-agent",
      status: "success",
      results: { data: { file: "src/main.ts", complexity: 3 }, summary: "ok" },
    });
    expect(response.execution?.duration).toBeGreaterThanOrEqual(0);
    expect(agent.calls).toHaveLength(1);
    expect(audit.entries).toEqual([
      {
        timestamp: command.timestamp,
        messageId: command.id,
        type: "command",
        from: "orchestrator",
        to: "code-agent",
        action: "ANALYZE",
      },
      {
        timestamp: response.timestamp,
        messageId: response.id,
        type: "response",
        from: "code-agent",
        to: "orchestrator",
        action: "ANALYZE",
        status: "success",
        commandId: command.id,
      },
    ]);
  });

  it("a handler's CommandError becomes a failed response with its category", async () => {
    const { orch } = orchestrator();
    orch.addAgent({
      id: "picky",
      handler: () => {
        throw new CommandError("user_error", "parameter file is missing");
      },
    });
    const response = await orch.send(orch.command({ to: "picky", action: "ANALYZE" }));
    expect(response.status).toBe("failed");
    expect(response.error).toEqual({
      code: "user_error",
      message: "parameter file is missing",
      recoverable: false,
    });
  });

  it("a partial result counts as success and keeps its status", async () => {
    const { orch } = orchestrator();
    orch.addAgent({ id: "half", handler: () => ({ status: "partial", data: [1] }) });
    const response = await orch.send(orch.command({ to: "half", action: "TEST" }));
    expect(response.status).toBe("partial");
    expect(response.error).toBeUndefined();
  });

  it("a command to an unregistered agent fails as user_error without anything sent", async () => {
    const { orch } = orchestrator();
    const response = await orch.send(orch.command({ to: "nobody", action: "ANALYZE" }));
    expect(response.error?.code).toBe("user_error");
    expect(failureReason(response)).toBe("unknown_agent");
  });
});

describe("sendAsync (fire-and-forget)", () => {
  it("returns once handed over, runs the handler in the background, and audits command and response", async () => {
    const { orch, audit } = orchestrator();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    orch.addAgent({
      id: "logger",
      handler: async () => {
        await gate;
        return { data: "logged" };
      },
    });
    const command = orch.command({
      to: "logger",
      action: "EXECUTE",
      priority: "low",
      parameters: { operation: "log" },
    });
    const receipt = await orch.sendAsync(command);
    expect(receipt).toEqual({ commandId: command.id, accepted: true });
    expect(audit.commands().map((e) => e.messageId)).toEqual([command.id]);
    expect(audit.responses()).toHaveLength(0);
    release();
    await orch.drain();
    expect(audit.responses()).toMatchObject([{ commandId: command.id, status: "success", from: "logger" }]);
  });

  it("a refused command is not accepted and says why", async () => {
    const { orch, audit } = orchestrator();
    orch.addAgent({ id: "logger", permissions: [], handler: () => ({}) });
    const receipt = await orch.sendAsync(
      orch.command({ to: "logger", action: "EXECUTE", security: { permissions: ["fs:write"] } }),
    );
    expect(receipt.accepted).toBe(false);
    expect(receipt.response?.error?.code).toBe("permission_error");
    expect(audit.responses()).toHaveLength(1);
  });
});

describe("broadcast", () => {
  it("sends a copy with a fresh id to each agent and reports failures per agent", async () => {
    const { orch } = orchestrator();
    const ok1 = recording();
    const ok2 = recording();
    orch.addAgent({ id: "agent-1", handler: ok1 });
    orch.addAgent({ id: "agent-2", handler: ok2 });
    orch.addAgent({
      id: "agent-3",
      handler: () => {
        throw new Error("disk full");
      },
    });
    const result = await orch.broadcast({ action: "VALIDATE", parameters: { rule: "x" } }, [
      "agent-1",
      "agent-2",
      "agent-3",
    ]);
    expect(result.status).toBe("partial");
    expect(result.succeeded).toEqual(["agent-1", "agent-2"]);
    expect(result.failed).toEqual(["agent-3"]);
    const ids = result.outcomes.map((o) => o.command.id);
    expect(new Set(ids).size).toBe(3);
    expect(result.outcomes.map((o) => o.command.to)).toEqual(["agent-1", "agent-2", "agent-3"]);
    // A plain Error is internal detail: the caller gets a generic agent_error with a correlation id.
    expect(result.outcomes[2]?.response.error).toEqual({
      code: "agent_error",
      message: expect.stringMatching(
        /^agent-3 failed with an internal error \(correlation id [0-9a-f-]{36}\)$/,
      ),
      recoverable: false,
    });
    expect(ok1.calls[0]?.parameters).toEqual({ rule: "x" });
  });

  it("is failed when no agent succeeds", async () => {
    const { orch } = orchestrator();
    const result = await orch.broadcast({ action: "VALIDATE" }, ["ghost-1", "ghost-2"]);
    expect(result.status).toBe("failed");
    expect(result.failed).toEqual(["ghost-1", "ghost-2"]);
  });
});

describe("pipeline", () => {
  it("passes each step's data and the previous command id as correlationId", async () => {
    const { orch } = orchestrator();
    const architect = recording(() => ({ data: { modules: ["a", "b"] } }));
    const coder = recording((command) => ({
      data: { code: `impl of ${JSON.stringify(command.parameters.design)}` },
    }));
    const validator = recording((command) => ({ data: { valid: true, seen: command.parameters.input } }));
    orch.addAgent({ id: "architect", handler: architect });
    orch.addAgent({ id: "coder", handler: coder });
    orch.addAgent({ id: "validator", handler: validator });
    const result = await orch.pipeline([
      { to: "architect", action: "DESIGN", priority: "high", parameters: { requirements: "r" } },
      { to: "coder", action: "IMPLEMENT", priority: "high", input: "design" },
      (previous) => ({ to: "validator", action: "VALIDATE", parameters: { input: previous?.results.data } }),
    ]);
    expect(result.status).toBe("success");
    expect(coder.calls[0]?.parameters).toEqual({ design: { modules: ["a", "b"] } });
    expect(validator.calls[0]?.parameters).toEqual({ input: { code: 'impl of {"modules":["a","b"]}' } });
    const [first, second, third] = result.outcomes;
    expect(first?.command.context?.correlationId).toBeUndefined();
    expect(second?.command.context?.correlationId).toBe(first?.command.id);
    expect(third?.command.context?.correlationId).toBe(second?.command.id);
    expect(result.data).toEqual({ valid: true, seen: { code: 'impl of {"modules":["a","b"]}' } });
  });

  it("stops at the first failure unless told to continue", async () => {
    const { orch } = orchestrator();
    const after = recording();
    orch.addAgent({ id: "ok", handler: () => ({ data: 1 }) });
    orch.addAgent({
      id: "broken",
      handler: () => {
        throw new CommandError("agent_error", "no");
      },
    });
    orch.addAgent({ id: "after", handler: after });
    const steps = [
      { to: "ok", action: "DESIGN" as const },
      { to: "broken", action: "IMPLEMENT" as const },
      { to: "after", action: "TEST" as const },
    ];
    const stopped = await orch.pipeline(steps);
    expect(stopped).toMatchObject({ status: "failed", failedStep: 1, data: 1 });
    expect(stopped.outcomes).toHaveLength(2);
    expect(after.calls).toHaveLength(0);

    const continued = await orch.pipeline(steps, { continueOnFailure: true });
    expect(continued.status).toBe("partial");
    expect(continued.outcomes).toHaveLength(3);
    expect(after.calls).toHaveLength(1);
  });
});

describe("scatter-gather", () => {
  it("runs in parallel and aggregates the successes", async () => {
    const { orch } = orchestrator({ performance: { max_parallel: 3 } });
    for (const type of ["security", "performance", "style"]) {
      orch.addAgent({
        id: `${type}-analyzer`,
        handler: (command) => ({ data: { type: command.parameters.type, issues: type.length } }),
      });
    }
    const result = await orch.scatterGather(
      ["security", "performance", "style"].map((type) => ({
        to: `${type}-analyzer`,
        action: "ANALYZE" as const,
        parameters: { code: "x", type },
      })),
      { aggregate: aggregators.collect },
    );
    expect(result.status).toBe("success");
    expect(result.result).toEqual({
      "security-analyzer": { type: "security", issues: 8 },
      "performance-analyzer": { type: "performance", issues: 11 },
      "style-analyzer": { type: "style", issues: 5 },
    });
  });

  it("reports answers later than the deadline as timeout, and meets minSuccess with the rest", async () => {
    const { orch } = orchestrator();
    let slowSawAbort = false;
    orch.addAgent({ id: "fast-1", handler: () => ({ data: 1 }) });
    orch.addAgent({ id: "fast-2", handler: () => ({ data: 2 }) });
    orch.addAgent({
      id: "slow",
      handler: async (_command, { signal }) => {
        await delay(5_000, signal).catch(() => {
          slowSawAbort = true;
        });
        return { data: 3 };
      },
    });
    const result = await orch.scatterGather(
      ["fast-1", "fast-2", "slow"].map((to) => ({ to, action: "ANALYZE" as const })),
      {
        aggregate: (successes) => successes.map((o) => o.response.results.data),
        minSuccess: 2,
        deadlineMs: 200,
      },
    );
    expect(result.status).toBe("partial");
    expect(result.result).toEqual([1, 2]);
    const late = result.outcomes[2]!.response;
    expect(late.status).toBe("timeout");
    expect(late.error?.code).toBe("timeout_error");
    expect(failureReason(late)).toBe("deadline");
    expect(slowSawAbort).toBe(true);
  });

  it("fails without a result when fewer than minSuccess succeed", async () => {
    const { orch } = orchestrator();
    orch.addAgent({ id: "a", handler: () => ({ data: 1 }) });
    orch.addAgent({
      id: "b",
      handler: () => {
        throw new Error("x");
      },
    });
    const result = await orch.scatterGather(
      [
        { to: "a", action: "ANALYZE" },
        { to: "b", action: "ANALYZE" },
      ],
      { aggregate: () => "never", minSuccess: 2 },
    );
    expect(result).toMatchObject({
      status: "failed",
      succeeded: 1,
      error: "only 1 of 2 succeeded; 2 needed",
    });
    expect(result.result).toBeUndefined();
  });

  it("rejects an impossible minSuccess", async () => {
    const { orch } = orchestrator();
    await expect(
      orch.scatterGather([{ to: "a", action: "ANALYZE" }], { aggregate: () => 0, minSuccess: 2 }),
    ).rejects.toThrow(/minSuccess must be a whole number from 0 to 1/);
  });
});

describe("metrics", () => {
  it("per agent: attempts by status, success rate, latency, circuit state; served on the orchestrator's own /metrics", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 1 } });
    orch.addAgent({ id: "good", handler: () => ({ data: 1 }) });
    orch.addAgent({
      id: "bad",
      handler: () => {
        throw new Error("x");
      },
    });
    await orch.send(orch.command({ to: "good", action: "TEST" }));
    await orch.send(orch.command({ to: "good", action: "TEST" }));
    await orch.send(orch.command({ to: "bad", action: "TEST" }));
    expect(orch.metrics.snapshot()).toMatchObject([
      { agent: "good", attempts: 2, successRate: 1, breaker: "closed" },
      { agent: "bad", attempts: 1, successRate: 0, breaker: "closed" },
    ]);
    const server = await serveMetrics(orch.metrics);
    try {
      const text = await (await fetch(server.url)).text();
      expect(text).toContain('acp_orchestrator_commands_total{agent="good",status="success"} 2');
      expect(text).toContain('acp_orchestrator_commands_total{agent="bad",status="failed"} 1');
      expect(text).toContain('acp_orchestrator_success_ratio{agent="bad"} 0');
      expect(text).toContain("# TYPE acp_orchestrator_latency_p99_ms gauge");
      expect((await fetch(server.url.replace("/metrics", "/other"))).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});

describe("audit_level", () => {
  it("basic records only each command's final response; detailed records every attempt", async () => {
    for (const [level, expected] of [
      ["basic", 1],
      ["detailed", 2],
    ] as const) {
      const { orch, audit } = orchestrator({ security: { audit_level: level } });
      let calls = 0;
      orch.addAgent({
        id: "flaky",
        handler: () => {
          if (++calls === 1) throw new CommandError("system_error", "blip", { recoverable: true });
          return { data: "ok" };
        },
      });
      await orch.send(
        orch.command({
          to: "flaky",
          action: "TEST",
          context: { retryPolicy: { maxAttempts: 2, backoffMs: 0 } },
        }),
      );
      expect(audit.responses().map((e) => e.status)).toEqual(
        expected === 1 ? ["success"] : ["failed", "success"],
      );
    }
  });
});

describe("agent registration", () => {
  it("refuses a remote agent reached through another agent's SDK client, and duplicates", () => {
    const { orch } = orchestrator();
    const client = { agentId: "someone-else", request: async () => ({}), notify: async () => ({ id: "x" }) };
    expect(() => orch.addAgent({ id: "a", remote: client })).toThrow(
      "remote agents must be reached through this orchestrator's own agent orchestrator, not someone-else",
    );
    orch.addAgent({ id: "a", handler: () => ({}) });
    expect(() => orch.addAgent({ id: "a", handler: () => ({}) })).toThrow("agent a is already registered");
    expect(orch.agentIds).toEqual(["a"]);
    expect(orch.removeAgent("a")).toBe(true);
    expect(orch.agentIds).toEqual([]);
  });
});
