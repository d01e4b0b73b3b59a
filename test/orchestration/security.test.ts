import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readAudit, verifyAuditRoot } from "../../src/audit/index.js";
import {
  type CommandError,
  type ApprovalRecord,
  AuditLogCommandSink,
  failureReason,
  Orchestrator,
  parseCommand,
  SqliteApprovalStore,
} from "../../src/orchestration/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { orchestrator, recording } from "./helpers.js";

const tmp = useTmpDir("acp-orch-");

describe("command validation", () => {
  it("rejects an invalid command with user_error naming every failing field, sending nothing", async () => {
    const { orch, audit } = orchestrator();
    const agent = recording();
    orch.addAgent({ id: "code-agent", handler: agent });
    const bad = {
      ...orch.command({ to: "code-agent", action: "ANALYZE" }),
      priority: "urgent",
      action: "DELETE",
      version: "1.0",
      prority: "low",
    };
    const response = await orch.send(bad as never);
    expect(response.status).toBe("failed");
    expect(response.error?.code).toBe("user_error");
    expect(response.error?.recoverable).toBe(false);
    const problems = (response.results.data as { problems: { path: string }[] }).problems.map((p) => p.path);
    expect(problems).toEqual(expect.arrayContaining(["/priority", "/action", "/version", ""]));
    expect(response.error?.message).toMatch(/\/priority: .*"low"/);
    expect(response.error?.message).toContain('Unrecognized key: "prority"');
    expect(agent.calls).toHaveLength(0);
    expect(audit.commands()).toHaveLength(0);
    expect(audit.responses()).toHaveLength(1);
  });

  it("refuses a command whose from is not this orchestrator (no sending in another agent's name)", async () => {
    const { orch } = orchestrator();
    orch.addAgent({ id: "a", handler: () => ({}) });
    const response = await orch.send({ ...orch.command({ to: "a", action: "TEST" }), from: "someone-else" });
    expect(response.error?.code).toBe("user_error");
    expect(response.error?.message).toContain("/from: must be this orchestrator's id orchestrator");
  });

  it("parseCommand throws a user_error CommandError with the problems", () => {
    expect(() => parseCommand({ id: "x" })).toThrow(/invalid command: .*\/timestamp/);
    try {
      parseCommand({});
    } catch (err) {
      expect((err as CommandError).kind).toBe("user_error");
    }
  });
});

describe("permission validation", () => {
  it("refuses a command needing a permission the agent is not granted, without sending it", async () => {
    const { orch } = orchestrator();
    const agent = recording();
    orch.addAgent({ id: "reader", permissions: ["fs:read"], handler: agent });
    const denied = await orch.send(
      orch.command({ to: "reader", action: "EXECUTE", security: { permissions: ["fs:read", "fs:write"] } }),
    );
    expect(denied.status).toBe("failed");
    expect(denied.error).toEqual({
      code: "permission_error",
      message: "reader is not granted fs:write; the command was not sent",
      recoverable: false,
    });
    expect(agent.calls).toHaveLength(0);
    const allowed = await orch.send(
      orch.command({ to: "reader", action: "EXECUTE", security: { permissions: ["fs:read"] } }),
    );
    expect(allowed.status).toBe("success");
  });

  it("require_permissions: false turns the check off", async () => {
    const { orch } = orchestrator({ security: { require_permissions: false } });
    orch.addAgent({ id: "reader", permissions: [], handler: () => ({}) });
    const response = await orch.send(
      orch.command({ to: "reader", action: "EXECUTE", security: { permissions: ["x"] } }),
    );
    expect(response.status).toBe("success");
  });
});

describe("approval workflow (local SQLite store)", () => {
  const stores: SqliteApprovalStore[] = [];
  afterEach(async () => {
    vi.useRealTimers();
    for (const store of stores.splice(0)) await store.close();
  });
  const open = (file: string) => {
    const store = SqliteApprovalStore.open(file, { pollMs: 20 });
    stores.push(store);
    return store;
  };

  function setup(threshold: "high" | "none" = "none", file = join(tmp(), "approvals.db")) {
    const approvals = open(file);
    const requested: ApprovalRecord[] = [];
    const { orch, audit } = orchestrator(
      { security: { approval_threshold: threshold, approval_timeout: 60_000 } },
      { approvals, principal: "alice" },
    );
    const agent = recording(() => ({ data: "executed" }));
    orch.addAgent({ id: "deployer", handler: agent });
    return {
      orch,
      audit,
      agent,
      approvals,
      requested,
      file,
      onApproval: (a: ApprovalRecord) => requested.push(a),
    };
  }

  it("waits for the principal's approval, then sends", async () => {
    const { orch, agent, approvals, requested, onApproval } = setup();
    const command = orch.command({
      to: "deployer",
      action: "EXECUTE",
      security: { permissions: [], requireApproval: true },
    });
    const pending = orch.send(command, { onApproval });
    await vi.waitFor(() => expect(requested).toHaveLength(1));
    expect(agent.calls).toHaveLength(0);
    const [listed] = await approvals.list({ status: "pending" });
    expect(listed).toMatchObject({
      id: requested[0]?.id,
      command,
      requestedBy: "orchestrator",
      principal: "alice",
      reason: "the command sets security.requireApproval",
    });
    await approvals.decide(listed!.id, { decision: "approved", by: "alice" });
    const response = await pending;
    expect(response.status).toBe("success");
    expect(agent.calls).toHaveLength(1);
    await expect(approvals.decide(listed!.id, { decision: "denied", by: "alice" })).rejects.toThrow(
      /already approved/,
    );
  });

  it("a denial yields a failed response with the approver's reason, and nothing is sent", async () => {
    const { orch, agent, approvals, requested, onApproval } = setup("high");
    const pending = orch.send(orch.command({ to: "deployer", action: "EXECUTE", priority: "critical" }), {
      onApproval,
    });
    await vi.waitFor(() => expect(requested).toHaveLength(1));
    expect(requested[0]?.reason).toBe("priority critical is at or above approval_threshold high");
    await approvals.decide(requested[0]!.id, {
      decision: "denied",
      by: "alice",
      note: "not during the freeze",
    });
    const response = await pending;
    expect(response.status).toBe("failed");
    expect(response.error).toEqual({
      code: "permission_error",
      message: `approval ${requested[0]!.id} was denied by alice: not during the freeze`,
      recoverable: false,
    });
    expect(failureReason(response)).toBe("approval_denied");
    expect(agent.calls).toHaveLength(0);
  });

  it("below the threshold no approval is asked", async () => {
    const { orch, requested, onApproval } = setup("high");
    expect(
      (
        await orch.send(orch.command({ to: "deployer", action: "EXECUTE", priority: "medium" }), {
          onApproval,
        })
      ).status,
    ).toBe("success");
    expect(requested).toHaveLength(0);
  });

  it("an approval timeout fails the command with a clear reason (fake timers)", async () => {
    vi.useFakeTimers({
      now: new Date("2026-02-14T12:00:00Z"),
      toFake: ["setTimeout", "clearTimeout", "Date"],
    });
    const { orch, agent, approvals, requested, onApproval } = setup();
    const pending = orch.send(
      orch.command({
        to: "deployer",
        action: "EXECUTE",
        security: { permissions: [], requireApproval: true },
      }),
      { onApproval },
    );
    await vi.advanceTimersByTimeAsync(59_000);
    expect(requested).toHaveLength(1);
    expect((await approvals.get(requested[0]!.id))?.status).toBe("pending");
    await vi.advanceTimersByTimeAsync(2_000);
    const response = await pending;
    expect(response.status).toBe("failed");
    expect(failureReason(response)).toBe("approval_expired");
    expect(response.error?.message).toBe(
      `approval ${requested[0]!.id} expired: no decision by 2026-02-14T12:01:00.000Z; the command was not sent`,
    );
    expect(agent.calls).toHaveLength(0);
    await expect(approvals.decide(requested[0]!.id, { decision: "approved", by: "alice" })).rejects.toThrow(
      /already expired/,
    );
  });

  it("without an approval store a command needing approval is refused", async () => {
    const { orch } = orchestrator();
    orch.addAgent({ id: "x", handler: () => ({}) });
    const response = await orch.send(
      orch.command({ to: "x", action: "EXECUTE", security: { permissions: [], requireApproval: true } }),
    );
    expect(failureReason(response)).toBe("approval_unavailable");
  });

  it("cancelling while waiting withdraws the approval", async () => {
    const { orch, approvals, requested, onApproval } = setup();
    const controller = new AbortController();
    const pending = orch.send(
      orch.command({
        to: "deployer",
        action: "EXECUTE",
        security: { permissions: [], requireApproval: true },
      }),
      { onApproval, signal: controller.signal },
    );
    await vi.waitFor(() => expect(requested).toHaveLength(1));
    controller.abort(new Error("changed my mind"));
    expect((await pending).status).toBe("cancelled");
    expect((await approvals.get(requested[0]!.id))?.status).toBe("cancelled");
  });

  it("a pending approval survives an orchestrator restart and is executed once approved", async () => {
    const first = setup();
    const controller = new AbortController();
    // The process "dies" while waiting: nothing withdraws the approval.
    void first.orch.send(
      first.orch.command({
        to: "deployer",
        action: "DOCUMENT",
        security: { permissions: [], requireApproval: true },
      }),
      { onApproval: first.onApproval, signal: controller.signal },
    );
    await vi.waitFor(() => expect(first.requested).toHaveLength(1));
    stores.splice(stores.indexOf(first.approvals), 1);
    await first.approvals.close();

    const approvals = open(first.file);
    const restarted = new Orchestrator({
      id: "orchestrator",
      config: { security: { approval_threshold: "none" } },
      audit: false,
      approvals,
    });
    const agent = recording(() => ({ data: "after restart" }));
    restarted.addAgent({ id: "deployer", handler: agent });
    const resumed = restarted.resumeApprovals();
    const [pending] = await approvals.list({ status: "pending" });
    expect(pending?.id).toBe(first.requested[0]?.id);
    await approvals.decide(pending!.id, { decision: "approved", by: "alice" });
    const responses = await resumed;
    expect(responses.map((r) => r.results.data)).toEqual(["after restart"]);
    expect(agent.calls.map((c) => c.id)).toEqual([pending!.command.id]);
    expect(first.agent.calls).toHaveLength(0);
  });
});

describe("audit into the ACP audit log", () => {
  it("records each command and response as a hash-chained entry readable with acp audit", async () => {
    const root = tmp();
    const sink = await AuditLogCommandSink.open({ agent: "orchestrator-commands", root, principal: "alice" });
    const orch = new Orchestrator({
      id: "orchestrator",
      audit: sink,
      config: { security: { approval_threshold: "none" } },
    });
    orch.addAgent({ id: "code-agent", handler: () => ({ data: 1 }) });
    const command = orch.command({ to: "code-agent", action: "ANALYZE", parameters: { secret: "hunter2" } });
    const response = await orch.send(command);
    await sink.close();
    const entries = [];
    for await (const record of readAudit({ root, agent: "orchestrator-commands" }))
      entries.push(record.entry);
    expect(entries).toMatchObject([
      {
        direction: "sent",
        type: "command",
        action: "ANALYZE",
        method: "agent.command",
        id: command.id,
        messageId: command.id,
        from: { agent: "orchestrator", principal: "alice" },
        to: { agent: "code-agent", principal: null },
        summary: `Command ANALYZE to code-agent (command ${command.id}).`,
      },
      {
        direction: "received",
        type: "response",
        action: "ANALYZE",
        status: "success",
        id: command.id,
        messageId: response.id,
        from: { agent: "code-agent", principal: null },
        to: { agent: "orchestrator", principal: "alice" },
        summary: `Response success from code-agent to ANALYZE ${command.id}.`,
      },
    ]);
    expect(JSON.stringify(entries)).not.toContain("hunter2");
    expect((await verifyAuditRoot({ root, agent: "orchestrator-commands" }))[0]?.ok).toBe(true);
  });

  it("does not send a command whose audit entry cannot be written", async () => {
    const agent = recording();
    const orch = new Orchestrator({
      id: "orchestrator",
      config: { security: { approval_threshold: "none" } },
      audit: {
        record: async () => {
          throw new Error("disk full");
        },
      },
      onError: () => undefined,
    });
    orch.addAgent({ id: "a", handler: agent });
    const response = await orch.send(orch.command({ to: "a", action: "EXECUTE" }));
    expect(response.error).toMatchObject({ code: "system_error" });
    expect(failureReason(response)).toBe("audit_failed");
    expect(agent.calls).toHaveLength(0);
  });
});
