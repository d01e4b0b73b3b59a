/**
 * What a caller learns about a command: the whole time and the attempts behind an answer, the real
 * error behind an open circuit, no internal detail from a crashed handler, and audit entries that
 * `jq` can filter by the command layer's own fields.
 */
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  AuditLogCommandSink,
  CommandError,
  failureReason,
  Orchestrator,
} from "../../src/orchestration/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { orchestrator, recording } from "./helpers.js";

const tmp = useTmpDir("acp-orch-reporting-");

/** Fails recoverably `failures` times, then answers. */
function flaky(failures: number, why = "model overloaded") {
  let calls = 0;
  return recording(() => {
    calls++;
    if (calls <= failures) throw new CommandError("agent_error", why, { recoverable: true });
    return { data: "finally" };
  });
}

describe("attempts and the whole duration", () => {
  it("an answer after retries says how many attempts and how long they took in all", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 3, backoff_ms: 100, jitter: false } });
    orch.addAgent({ id: "flaky", handler: flaky(2) });
    const response = await orch.send(orch.command({ to: "flaky", action: "ANALYZE" }));
    expect(response.status).toBe("success");
    expect(response.execution?.attempts).toBe(3);
    // Backoff waits of 100 and 200 ms lie between the attempts.
    expect(response.execution?.totalDuration).toBeGreaterThanOrEqual(300);
    // The duration is the last attempt's alone, so less than the whole (which holds the waits too).
    expect(response.execution?.duration).toBeLessThan(response.execution?.totalDuration ?? 0);
  });

  it("a circuit that opens during the retries does not hide the agent's last real error", async () => {
    const { orch } = orchestrator({
      retry: { max_attempts: 5, backoff_ms: 1, jitter: false },
      circuit_breaker: { failure_threshold: 2, reset_timeout: 60_000 },
    });
    orch.addAgent({ id: "db-agent", handler: flaky(99, "the database is down") });
    const response = await orch.send(orch.command({ to: "db-agent", action: "EXECUTE" }));
    expect(response.status).toBe("failed");
    expect(failureReason(response)).toBe("agent_failed");
    expect(response.error?.message).toMatch(
      /^the database is down; not retried: the circuit to db-agent is open after 2 consecutive failures/,
    );
    expect(response.execution?.attempts).toBe(2);
  });
});

describe("a handler's internal failure", () => {
  it("reaches the caller as a generic agent_error with a correlation id; the detail is logged", async () => {
    const logged: { message: string; correlationId: string }[] = [];
    const { orch } = orchestrator(
      {},
      {
        logInternalError: (err, { correlationId }) =>
          logged.push({ message: (err as Error).message, correlationId }),
      },
    );
    orch.addAgent({
      id: "leaky",
      handler: () => {
        throw new Error("ENOENT: /srv/secret/config.json");
      },
    });
    const response = await orch.send(orch.command({ to: "leaky", action: "ANALYZE" }));
    expect(JSON.stringify(response)).not.toContain("secret");
    const [incident] = logged;
    expect(incident?.message).toBe("ENOENT: /srv/secret/config.json");
    expect(response.error).toEqual({
      code: "agent_error",
      message: `leaky failed with an internal error (correlation id ${incident?.correlationId})`,
      recoverable: false,
    });
    expect(response.results.data).toEqual({ reason: "agent_failed", correlationId: incident?.correlationId });
  });
});

describe("configuration", () => {
  it("takes the YAML file's shape { acp: … } as well as the section's content", () => {
    const fileShape = new Orchestrator({
      id: "o",
      audit: false,
      config: { acp: { retry: { max_attempts: 7 } } },
    });
    expect(fileShape.config.retry.max_attempts).toBe(7);
    const section = new Orchestrator({ id: "o", audit: false, config: { retry: { max_attempts: 6 } } });
    expect(section.config.retry.max_attempts).toBe(6);
    expect(
      () => new Orchestrator({ id: "o", audit: false, config: { acp: { retyr: {} } } as never }),
    ).toThrow(/acp\.retyr: unknown key/);
  });
});

describe("pipeline", () => {
  it("a failed pipeline lists the steps that never ran", async () => {
    const { orch } = orchestrator({ retry: { max_attempts: 1 } });
    orch.addAgent({ id: "architect", handler: () => ({ data: "design" }) });
    orch.addAgent({
      id: "coder",
      handler: () => {
        throw new CommandError("agent_error", "cannot build");
      },
    });
    orch.addAgent({ id: "validator", handler: recording() });
    const result = await orch.pipeline([
      { to: "architect", action: "DESIGN" },
      { to: "coder", action: "IMPLEMENT" },
      { to: "validator", action: "VALIDATE" },
    ]);
    expect(result).toMatchObject({ status: "failed", failedStep: 1 });
    expect(result.notRun).toEqual([{ index: 2, agent: "validator", action: "VALIDATE" }]);
  });
});

describe("audit entries", () => {
  it("carry type command|response, action, status and messageId as fields jq can filter", async () => {
    const root = tmp();
    const sink = await AuditLogCommandSink.open({ agent: "orchestrator-commands", root });
    const orch = new Orchestrator({
      id: "orchestrator",
      audit: sink,
      config: { security: { approval_threshold: "none" } },
    });
    orch.addAgent({ id: "code-agent", handler: () => ({ data: 1 }) });
    const command = orch.command({ to: "code-agent", action: "ANALYZE" });
    const response = await orch.send(command);
    await sink.close();
    const dir = join(root, "orchestrator-commands");
    const [file] = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));
    const jq = (filter: string) =>
      execFileSync("jq", ["-c", filter, join(dir, file!)], { encoding: "utf8" })
        .trim()
        .split("\n");
    expect(jq('select(.type == "command" and .action == "ANALYZE") | [.messageId, .to.agent]')).toEqual([
      JSON.stringify([command.id, "code-agent"]),
    ]);
    expect(
      jq('select(.type == "response" and .status == "success") | [.messageId, .id, .from.agent]'),
    ).toEqual([JSON.stringify([response.id, command.id, "code-agent"])]);
  });
});
