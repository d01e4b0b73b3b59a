import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CircuitBreaker } from "../../src/orchestration/breaker.js";
import { CommandError, type CommandHandler, failureReason } from "../../src/orchestration/index.js";
import { backoffDelay } from "../../src/orchestration/retry.js";
import { orchestrator, recording } from "./helpers.js";

const transient = () => {
  throw new CommandError("agent_error", "model overloaded", { recoverable: true });
};

/** A handler that never answers by itself; it ends only when its signal aborts. */
const hanging: CommandHandler = (_command, { signal }) =>
  new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason)));

describe("retry with exponential backoff (fake timers)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date("2026-02-14T12:00:00Z") });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("retries a recoverable failure max_attempts times, waiting backoff_ms × multiplier^n", async () => {
    const { orch, audit } = orchestrator({
      retry: { max_attempts: 4, backoff_ms: 1000, backoff_multiplier: 2, jitter: false },
    });
    const agent = recording(transient);
    orch.addAgent({ id: "flaky", handler: agent });
    const pending = orch.send(orch.command({ to: "flaky", action: "ANALYZE" }));
    await vi.advanceTimersByTimeAsync(10_000);
    const response = await pending;
    expect(agent.calls).toHaveLength(4);
    const start = agent.calls[0]!.at;
    expect(agent.calls.map((c) => c.at - start)).toEqual([0, 1000, 3000, 7000]);
    expect(response.status).toBe("failed");
    expect(response.error).toEqual({ code: "agent_error", message: "model overloaded", recoverable: true });
    // audit_level detailed (the default): every attempt's response is recorded.
    expect(audit.responses()).toHaveLength(4);
  });

  it("applies equal jitter: each wait lies between half and all of the exponential backoff", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 3, backoff_ms: 1000 } }, { random: () => 0 });
    const agent = recording(transient);
    orch.addAgent({ id: "flaky", handler: agent });
    const pending = orch.send(orch.command({ to: "flaky", action: "ANALYZE" }));
    await vi.advanceTimersByTimeAsync(10_000);
    await pending;
    const start = agent.calls[0]!.at;
    expect(agent.calls.map((c) => c.at - start)).toEqual([0, 500, 1500]);
    const policy = { maxAttempts: 5, backoffMs: 1000, multiplier: 2, maxBackoffMs: 3000, jitter: true };
    expect(backoffDelay(policy, 1, () => 1)).toBe(1000);
    expect(backoffDelay(policy, 3, () => 1)).toBe(3000);
    expect(backoffDelay(policy, 3, () => 0.5)).toBe(2250);
  });

  it("the command's retryPolicy overrides the configuration, and success ends the retries", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 9, jitter: false } });
    let calls = 0;
    orch.addAgent({
      id: "flaky",
      handler: () => {
        calls++;
        if (calls < 2) transient();
        return { data: "finally" };
      },
    });
    const pending = orch.send(
      orch.command({
        to: "flaky",
        action: "ANALYZE",
        context: { retryPolicy: { maxAttempts: 2, backoffMs: 50 } },
      }),
    );
    await vi.advanceTimersByTimeAsync(100);
    expect((await pending).results.data).toBe("finally");
    expect(calls).toBe(2);
  });

  it("never retries a failure that is not recoverable (the command layer's sample code did)", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 5 } });
    const refusing = recording(() => {
      throw new CommandError("user_error", "bad parameter", { recoverable: true });
    });
    const crashing = recording(() => {
      throw new Error("bug");
    });
    orch.addAgent({ id: "refusing", handler: refusing });
    orch.addAgent({ id: "crashing", handler: crashing });
    await orch.send(orch.command({ to: "refusing", action: "ANALYZE" }));
    await orch.send(orch.command({ to: "crashing", action: "ANALYZE" }));
    expect(refusing.calls).toHaveLength(1);
    expect(crashing.calls).toHaveLength(1);
  });

  it("cancelling during the backoff stops the retries with a cancelled response", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 5, backoff_ms: 1000, jitter: false } });
    const agent = recording(transient);
    orch.addAgent({ id: "flaky", handler: agent });
    const controller = new AbortController();
    const pending = orch.send(orch.command({ to: "flaky", action: "ANALYZE" }), {
      signal: controller.signal,
    });
    await vi.advanceTimersByTimeAsync(1500);
    controller.abort(new Error("user pressed ctrl-c"));
    const response = await pending;
    expect(response.status).toBe("cancelled");
    expect(response.error).toBeUndefined();
    expect(response.results.summary).toBe("cancelled: user pressed ctrl-c");
    expect(agent.calls).toHaveLength(2);
  });
});

describe("timeouts (fake timers)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date("2026-02-14T12:00:00Z") });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("uses the priority's timeout from the configuration, and the command's own when it sets one", async () => {
    const { orch } = orchestrator({
      timeouts: { default: 30_000, low_priority: 60_000, high_priority: 15_000 },
      retry: { max_attempts: 1 },
    });
    orch.addAgent({ id: "stuck", handler: hanging });
    const outcomes: Record<string, number> = {};
    const time = async (label: string, draft: Parameters<typeof orch.command>[0]) => {
      const started = Date.now();
      const pending = orch.send(orch.command(draft)).then((r) => {
        outcomes[label] = Date.now() - started;
        return r;
      });
      await vi.advanceTimersByTimeAsync(61_000);
      return pending;
    };
    const high = await time("high", { to: "stuck", action: "ANALYZE", priority: "high" });
    await time("medium", { to: "stuck", action: "ANALYZE" });
    await time("low", { to: "stuck", action: "ANALYZE", priority: "low" });
    await time("critical", { to: "stuck", action: "ANALYZE", priority: "critical" });
    await time("own", { to: "stuck", action: "ANALYZE", priority: "low", context: { timeout: 250 } });
    expect(outcomes).toEqual({ high: 15_000, medium: 30_000, low: 60_000, critical: 15_000, own: 250 });
    expect(high.status).toBe("timeout");
    expect(high.error).toEqual({
      code: "timeout_error",
      message: "no response from stuck within 15000 ms",
      recoverable: true,
    });
  });

  it("a timed-out attempt is retried (timeouts are recoverable) and the handler's signal is aborted", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 2, backoff_ms: 10, jitter: false } });
    let aborted = 0;
    const agent = recording((command, context) => {
      context.signal.addEventListener("abort", () => aborted++);
      return hanging(command, context);
    });
    orch.addAgent({ id: "stuck", handler: agent });
    const pending = orch.send(orch.command({ to: "stuck", action: "ANALYZE", context: { timeout: 100 } }));
    await vi.advanceTimersByTimeAsync(1000);
    expect((await pending).status).toBe("timeout");
    expect(agent.calls).toHaveLength(2);
    expect(aborted).toBe(2);
  });
});

describe("cancellation", () => {
  it("aborting the signal ends a running command as cancelled and aborts the handler's signal", async () => {
    const { orch } = orchestrator();
    let handlerSignal: AbortSignal | undefined;
    orch.addAgent({
      id: "slow",
      handler: (command, context) => {
        handlerSignal = context.signal;
        return hanging(command, context);
      },
    });
    const controller = new AbortController();
    const pending = orch.send(orch.command({ to: "slow", action: "EXECUTE" }), { signal: controller.signal });
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort(new Error("no longer needed"));
    const response = await pending;
    expect(response.status).toBe("cancelled");
    expect(handlerSignal?.aborted).toBe(true);
  });

  it("an already aborted signal sends nothing", async () => {
    const { orch } = orchestrator();
    const agent = recording();
    orch.addAgent({ id: "a", handler: agent });
    const response = await orch.send(orch.command({ to: "a", action: "EXECUTE" }), {
      signal: AbortSignal.abort(),
    });
    expect(response.status).toBe("cancelled");
    expect(agent.calls).toHaveLength(0);
  });
});

describe("fallback agents", () => {
  it("tries the fallback after the primary fails, with a new id correlated to the original", async () => {
    const { orch, audit } = orchestrator({ retry: { max_attempts: 1 } });
    const backup = recording(() => ({ data: "from backup" }));
    orch.addAgent({
      id: "primary",
      fallbacks: ["backup"],
      handler: () => {
        throw new Error("crashed");
      },
    });
    orch.addAgent({ id: "backup", handler: backup });
    const command = orch.command({ to: "primary", action: "ANALYZE", parameters: { q: 1 } });
    const response = await orch.send(command);
    expect(response).toMatchObject({ status: "success", from: "backup", results: { data: "from backup" } });
    expect(backup.calls[0]?.parameters).toEqual({ q: 1 });
    expect(response.commandId).not.toBe(command.id);
    expect(audit.commands().map((e) => e.to)).toEqual(["primary", "backup"]);
    expect(audit.commands()[1]?.messageId).toBe(response.commandId);
  });

  it("skips a fallback that lacks the command's permissions (the command layer's sample code did not check)", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 1 } });
    const unprivileged = recording();
    const privileged = recording(() => ({ data: "done by privileged" }));
    orch.addAgent({
      id: "primary",
      permissions: ["db:write"],
      handler: () => {
        throw new Error("crashed");
      },
    });
    orch.addAgent({ id: "unprivileged", permissions: ["db:read"], handler: unprivileged });
    orch.addAgent({ id: "privileged", permissions: ["db:write"], handler: privileged });
    const command = orch.command({
      to: "primary",
      action: "EXECUTE",
      security: { permissions: ["db:write"] },
    });
    const response = await orch.send(command, { fallbacks: ["unprivileged", "privileged"] });
    expect(unprivileged.calls).toHaveLength(0);
    expect(response.from).toBe("privileged");

    const onlyUnprivileged = await orch.send(
      orch.command({ to: "primary", action: "EXECUTE", security: { permissions: ["db:write"] } }),
      {
        fallbacks: ["unprivileged"],
      },
    );
    expect(onlyUnprivileged.status).toBe("failed");
    expect(onlyUnprivileged.results.summary).toContain(
      "fallbacks not used: unprivileged (not granted db:write)",
    );
    expect(unprivileged.calls).toHaveLength(0);
  });

  it("does not fall back on the caller's own mistakes", async () => {
    const { orch } = orchestrator();
    const backup = recording();
    orch.addAgent({
      id: "primary",
      fallbacks: ["backup"],
      handler: () => {
        throw new CommandError("user_error", "bad input");
      },
    });
    orch.addAgent({ id: "backup", handler: backup });
    expect((await orch.send(orch.command({ to: "primary", action: "ANALYZE" }))).error?.code).toBe(
      "user_error",
    );
    expect(backup.calls).toHaveLength(0);
  });
});

describe("circuit breaker (fake timers)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date("2026-02-14T12:00:00Z") });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("opens after failure_threshold failures, half-opens after reset_timeout, and a good trial closes it", async () => {
    const { orch } = orchestrator({
      retry: { max_attempts: 1 },
      circuit_breaker: { failure_threshold: 3, reset_timeout: 10_000 },
    });
    let healthy = false;
    const agent = recording(() => (healthy ? { data: "up" } : transient()));
    orch.addAgent({ id: "shaky", handler: agent });
    const send = () => orch.send(orch.command({ to: "shaky", action: "ANALYZE" }));
    for (let i = 0; i < 3; i++) await send();
    expect(orch.breakerState("shaky")).toBe("open");
    const refused = await send();
    expect(failureReason(refused)).toBe("circuit_open");
    expect(refused.error).toMatchObject({ code: "system_error", recoverable: true });
    expect(agent.calls).toHaveLength(3);

    await vi.advanceTimersByTimeAsync(10_000);
    expect(orch.breakerState("shaky")).toBe("half-open");
    // A failed trial opens it again for another reset timeout.
    await send();
    expect(agent.calls).toHaveLength(4);
    expect(orch.breakerState("shaky")).toBe("open");
    await vi.advanceTimersByTimeAsync(9_999);
    expect(failureReason(await send())).toBe("circuit_open");

    await vi.advanceTimersByTimeAsync(1);
    healthy = true;
    expect((await send()).status).toBe("success");
    expect(orch.breakerState("shaky")).toBe("closed");
    expect((await send()).status).toBe("success");
    expect(agent.calls).toHaveLength(6);
  });

  it("lets exactly one trial through while half-open", async () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, resetTimeoutMs: 1000 });
    const transitions: string[] = [];
    const watched = new CircuitBreaker({
      failureThreshold: 1,
      resetTimeoutMs: 1000,
      onChange: (from, to) => transitions.push(`${from}->${to}`),
    });
    for (const b of [breaker, watched]) b.acquire()?.fail();
    expect(breaker.state).toBe("open");
    expect(breaker.acquire()).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1000);
    const trial = breaker.acquire();
    expect(trial).toBeDefined();
    expect(breaker.acquire()).toBeUndefined();
    trial?.succeed();
    expect(breaker.state).toBe("closed");
    expect(breaker.acquire()).toBeDefined();

    watched.acquire()?.succeed();
    expect(transitions).toEqual(["closed->open", "open->half-open", "half-open->closed"]);
  });

  it("a cancelled trial says nothing about health: the circuit stays half-open", async () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, resetTimeoutMs: 1000 });
    breaker.acquire()?.fail();
    await vi.advanceTimersByTimeAsync(1000);
    breaker.acquire()?.release();
    expect(breaker.state).toBe("half-open");
    expect(breaker.acquire()).toBeDefined();
  });
});

describe("max_parallel", () => {
  it("never runs more than max_parallel commands at once", async () => {
    const { orch } = orchestrator({ performance: { max_parallel: 2 } });
    let running = 0;
    let peak = 0;
    const waiters: (() => void)[] = [];
    orch.addAgent({
      id: "worker",
      handler: async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise<void>((resolve) => waiters.push(resolve));
        running--;
        return { data: "done" };
      },
    });
    let settled = false;
    const all = Promise.all(
      Array.from({ length: 6 }, () => orch.send(orch.command({ to: "worker", action: "EXECUTE" }))),
    ).finally(() => {
      settled = true;
    });
    // Let the queue fill, then release the running handlers one tick at a time until all are done.
    while (!settled) {
      await new Promise((resolve) => setImmediate(resolve));
      expect(running).toBeLessThanOrEqual(2);
      waiters.shift()?.();
    }
    const responses = await all;
    expect(responses.map((r) => r.status)).toEqual(Array(6).fill("success"));
    expect(peak).toBe(2);
  });
});

describe("response caching (fake timers)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date("2026-02-14T12:00:00Z") });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("answers a repeated cacheable command from the cache until cache_ttl passes", async () => {
    const { orch } = orchestrator({
      performance: { enable_caching: true, cache_ttl: 60, cacheable_actions: ["ANALYZE"] },
    });
    const agent = recording((command) => ({ data: { file: command.parameters.file } }));
    orch.addAgent({ id: "analyzer", handler: agent });
    const ask = (file: string, action: "ANALYZE" | "EXECUTE" = "ANALYZE") =>
      orch.send(orch.command({ to: "analyzer", action, parameters: { file } }));
    const first = await ask("a.ts");
    const second = await ask("a.ts");
    expect(agent.calls).toHaveLength(1);
    expect(second.results).toEqual(first.results);
    expect(second.commandId).not.toBe(first.commandId);
    await ask("b.ts");
    expect(agent.calls).toHaveLength(2);
    await ask("a.ts", "EXECUTE");
    await ask("a.ts", "EXECUTE");
    expect(agent.calls).toHaveLength(4);
    await vi.advanceTimersByTimeAsync(60_000);
    await ask("a.ts");
    expect(agent.calls).toHaveLength(5);
    expect(orch.metrics.snapshot().find((s) => s.agent === "analyzer")?.cacheHits).toBe(1);
  });

  it("caches per command when asked, never failures, and not at all with enable_caching false", async () => {
    const { orch } = orchestrator({ performance: { enable_caching: true } });
    let fail = true;
    const agent = recording(() => (fail ? transient() : { data: 1 }));
    orch.addAgent({ id: "x", handler: agent });
    const ask = () =>
      orch.send(
        orch.command({
          to: "x",
          action: "EXECUTE",
          context: { retryPolicy: { maxAttempts: 1, backoffMs: 0 } },
        }),
        { cacheable: true },
      );
    await ask();
    fail = false;
    await ask();
    await ask();
    expect(agent.calls).toHaveLength(2);

    const off = orchestrator({ performance: { enable_caching: false } }).orch;
    const counted = recording();
    off.addAgent({ id: "y", handler: counted });
    await off.send(off.command({ to: "y", action: "ANALYZE" }), { cacheable: true });
    await off.send(off.command({ to: "y", action: "ANALYZE" }), { cacheable: true });
    expect(counted.calls).toHaveLength(2);
  });
});
