import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import {
  type ApprovalRecord,
  aggregators,
  CommandError,
  type CommandHandler,
  failureReason,
  HttpApprovalStore,
  Orchestrator,
  serveCommands,
} from "../../src/orchestration/index.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { MemorySink } from "./helpers.js";

/**
 * The same patterns as patterns.test.ts, with every agent a real ACP agent behind a real gateway:
 * commands travel as signed `agent.command` requests and come back as signed responses.
 */
const tmp = useTmpDir("acp-orch-remote-");

describe("orchestration of remote agents through a real gateway", () => {
  let gw: TestGateway;
  let dir: string;
  let orch: Orchestrator;
  let audit: MemorySink;
  const cleanups: (() => Promise<unknown>)[] = [];
  const calls: { agent: string; command: string; from: string; principal: string | undefined }[] = [];

  async function connect(who: TestAgent, on: TestGateway = gw): Promise<AcpAgent> {
    const agent = new AcpAgent({
      gateway: on.url,
      identity: who.identity,
      apiKey: who.apiKey,
      audit: { root: `${dir}/audit` },
      state: { root: `${dir}/state` },
      reconnect: { initialDelayMs: 50, maxDelayMs: 300 },
      requestTimeoutMs: 10_000,
    });
    agent.on("error", () => undefined);
    await agent.connect();
    cleanups.push(() => agent.close());
    return agent;
  }

  async function worker(id: string, handler: CommandHandler, permissions?: string[]): Promise<AcpAgent> {
    const agent = await connect(await gw.register(id, `owner-of-${id}`));
    serveCommands(
      agent,
      (command, context) => {
        calls.push({ agent: id, command: command.id, from: context.from, principal: context.principal });
        return handler(command, context);
      },
      permissions ? { permissions } : {},
    );
    return agent;
  }

  let client: AcpAgent;
  let orchIdentity: TestAgent;

  beforeEach(async () => {
    dir = tmp();
    calls.length = 0;
    audit = new MemorySink();
    orch = new Orchestrator({
      id: "orchestrator",
      principal: "alice",
      audit,
      config: { security: { approval_threshold: "none" }, retry: { max_attempts: 1 } },
    });
    gw = await startTestGateway({ extensions: [orch.gatewayExtension()] });
    cleanups.push(() => gw.close());
    orchIdentity = await gw.register("orchestrator", "alice");
    client = await connect(orchIdentity);
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it("send: a signed agent.command request, answered with the remote agent's AgentResponse", async () => {
    await worker("code-agent", (command) => ({
      data: { checked: command.parameters.file },
      summary: "2 issues",
    }));
    orch.addAgent({ id: "code-agent", remote: client });
    const command = orch.command({
      to: "code-agent",
      action: "ANALYZE",
      parameters: { file: "src/main.ts" },
    });
    const response = await orch.send(command);
    expect(response).toMatchObject({
      commandId: command.id,
      from: "code-agent",
      status: "success",
      results: { data: { checked: "src/main.ts" }, summary: "2 issues" },
    });
    // The handler saw the verified sender and its principal.
    expect(calls).toEqual([
      { agent: "code-agent", command: command.id, from: "orchestrator", principal: "alice" },
    ]);
    expect(audit.entries.map((e) => e.type)).toEqual(["command", "response"]);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toContain('acp_orchestrator_commands_total{agent="code-agent",status="success"} 1');
    expect(metrics).toContain('acp_orchestrator_circuit_state{agent="code-agent"} 0');
  });

  it("sendAsync: an agent.command notification that the remote agent runs", async () => {
    await worker("logger", () => ({}));
    orch.addAgent({ id: "logger", remote: client });
    const command = orch.command({
      to: "logger",
      action: "EXECUTE",
      priority: "low",
      parameters: { message: "done" },
    });
    const receipt = await orch.sendAsync(command);
    expect(receipt).toEqual({ commandId: command.id, accepted: true });
    await vi.waitFor(() => expect(calls.map((c) => c.command)).toEqual([command.id]), { timeout: 10_000 });
  });

  it("broadcast: partial failures reported per agent", async () => {
    await worker("agent-1", () => ({ data: 1 }));
    await worker("agent-2", () => {
      throw new CommandError("agent_error", "out of memory");
    });
    await worker("agent-3", () => ({ data: 3 }));
    for (const id of ["agent-1", "agent-2", "agent-3"]) orch.addAgent({ id, remote: client });
    const result = await orch.broadcast({ action: "VALIDATE" }, ["agent-1", "agent-2", "agent-3"]);
    expect(result.status).toBe("partial");
    expect(result.succeeded).toEqual(["agent-1", "agent-3"]);
    expect(result.outcomes[1]?.response).toMatchObject({
      status: "failed",
      from: "agent-2",
      error: { code: "agent_error", message: "out of memory", recoverable: false },
    });
  });

  it("pipeline: data and correlation passed from remote step to remote step", async () => {
    await worker("architect", () => ({ data: { modules: 2 } }));
    await worker("coder", (command) => ({
      data: { lines: Number((command.parameters.design as { modules: number }).modules) * 100 },
    }));
    await worker("validator", (command) => ({
      data: { ok: true, correlation: command.context?.correlationId },
    }));
    for (const id of ["architect", "coder", "validator"]) orch.addAgent({ id, remote: client });
    const result = await orch.pipeline([
      { to: "architect", action: "DESIGN" },
      { to: "coder", action: "IMPLEMENT", input: "design" },
      { to: "validator", action: "VALIDATE" },
    ]);
    expect(result.status).toBe("success");
    expect(result.outcomes[1]?.response.results.data).toEqual({ lines: 200 });
    expect(result.data).toEqual({ ok: true, correlation: result.outcomes[1]?.command.id });
  });

  it("scatter-gather: a remote agent answering after the deadline is reported as timeout and told to stop", async () => {
    let slowAborted = false;
    await worker("fast-a", () => ({ data: "a" }));
    await worker("fast-b", () => ({ data: "b" }));
    await worker(
      "slow",
      (_command, { signal }) =>
        new Promise((resolve) => {
          const timer = setTimeout(() => resolve({ data: "late" }), 20_000);
          signal.addEventListener("abort", () => {
            slowAborted = true;
            clearTimeout(timer);
            resolve({ data: "aborted" });
          });
        }),
    );
    for (const id of ["fast-a", "fast-b", "slow"]) orch.addAgent({ id, remote: client });
    // Handshakes first, so the deadline measures the commands alone.
    for (const id of ["fast-a", "fast-b", "slow"]) await client.handshake(id);
    const result = await orch.scatterGather(
      ["fast-a", "fast-b", "slow"].map((to) => ({ to, action: "ANALYZE" as const })),
      { aggregate: aggregators.collect, minSuccess: 2, deadlineMs: 1_500 },
    );
    expect(result.status).toBe("partial");
    expect(result.result).toEqual({ "fast-a": "a", "fast-b": "b" });
    expect(result.outcomes[2]?.response.status).toBe("timeout");
    expect(failureReason(result.outcomes[2]!.response)).toBe("deadline");
    await vi.waitFor(() => expect(slowAborted).toBe(true), { timeout: 10_000 });
  });

  it("the receiving agent refuses commands it is not granted, and commands in another agent's name", async () => {
    await worker("reader", () => ({ data: "read" }), ["fs:read"]);
    orch.addAgent({ id: "reader", remote: client, permissions: ["fs:read", "fs:write"] });
    const refused = await orch.send(
      orch.command({ to: "reader", action: "EXECUTE", security: { permissions: ["fs:write"] } }),
    );
    expect(refused).toMatchObject({
      status: "failed",
      error: { code: "permission_error", message: "reader is not granted fs:write" },
    });

    const spoofed = orch.command({ to: "reader", action: "EXECUTE" });
    const answer = await client.request(
      "reader",
      { ...spoofed, from: "mallory" },
      { method: "agent.command" },
    );
    expect(answer).toMatchObject({
      status: "failed",
      error: { code: "permission_error", message: "command.from is mallory, but orchestrator signed it" },
    });
    const invalid = await client.request("reader", { action: "EXECUTE" }, { method: "agent.command" });
    expect(invalid).toMatchObject({ status: "failed", error: { code: "user_error" } });
    expect((invalid.error as { message: string }).message).toMatch(/\/id: .*\/timestamp/);
    expect(calls).toHaveLength(0);
  });

  it("a remote agent that never answers times out; a repeated command id is answered without running twice", async () => {
    let runs = 0;
    await worker("counter", () => ({ data: ++runs }));
    orch.addAgent({ id: "counter", remote: client });
    const command = orch.command({ to: "counter", action: "EXECUTE" });
    const first = await orch.send(command);
    const again = await client.request("counter", command, { method: "agent.command" });
    expect(first.results.data).toBe(1);
    expect((again.results as { data: number }).data).toBe(1);
    expect(runs).toBe(1);

    // Answers only once its own timeout (the command's context.timeout) aborts it: too late.
    await worker(
      "silent",
      (_command, { signal }) => new Promise((resolve) => signal.addEventListener("abort", () => resolve({}))),
    );
    orch.addAgent({ id: "silent", remote: client });
    const response = await orch.send(
      orch.command({ to: "silent", action: "ANALYZE", context: { timeout: 1_500 } }),
    );
    expect(response.status).toBe("timeout");
  });

  describe("approval through the gateway API", () => {
    let orchWithApprovals: Orchestrator;
    let admin: HttpApprovalStore;
    const requested: ApprovalRecord[] = [];

    beforeEach(() => {
      requested.length = 0;
      orchWithApprovals = new Orchestrator({
        id: "orchestrator",
        audit: false,
        approvals: new HttpApprovalStore({ gateway: gw.url, credential: orchIdentity.apiKey }),
        config: { security: { approval_threshold: "critical" } },
      });
      admin = new HttpApprovalStore({ gateway: gw.url, credential: gw.adminToken });
    });

    it("approve and deny through the API; agents cannot decide", async () => {
      await worker("deployer", () => ({ data: "deployed" }));
      orchWithApprovals.addAgent({ id: "deployer", remote: client });
      const onApproval = (a: ApprovalRecord) => requested.push(a);
      const approvedRun = orchWithApprovals.send(
        orchWithApprovals.command({ to: "deployer", action: "EXECUTE", priority: "critical" }),
        { onApproval },
      );
      await vi.waitFor(() => expect(requested).toHaveLength(1));
      const [listed] = await admin.list({ status: "pending" });
      expect(listed).toMatchObject({ id: requested[0]?.id, requestedBy: "orchestrator", principal: "alice" });

      const asAgent = new HttpApprovalStore({ gateway: gw.url, credential: orchIdentity.apiKey });
      await expect(asAgent.decide(listed!.id, { decision: "approved", by: "me" })).rejects.toMatchObject({
        reason: "Forbidden",
      });
      const other = await gw.register("other-agent", "bob");
      const asOther = new HttpApprovalStore({ gateway: gw.url, credential: other.apiKey });
      expect(await asOther.get(listed!.id)).toBeNull();
      expect(await asOther.list()).toEqual([]);

      const decided = await admin.decide(listed!.id, { decision: "approved", by: "alice" });
      expect(decided).toMatchObject({ status: "approved", decidedBy: "alice" });
      expect((await approvedRun).results.data).toBe("deployed");

      const deniedRun = orchWithApprovals.send(
        orchWithApprovals.command({ to: "deployer", action: "EXECUTE", priority: "critical" }),
        { onApproval },
      );
      await vi.waitFor(() => expect(requested).toHaveLength(2));
      await admin.decide(requested[1]!.id, { decision: "denied", by: "alice", note: "too risky" });
      const denied = await deniedRun;
      expect(denied.error?.message).toBe(`approval ${requested[1]!.id} was denied by alice: too risky`);
      expect(calls).toHaveLength(1);
    });

    it("a pending approval survives a gateway restart", async () => {
      const dataDir = gw.dataDir;
      const port = Number(new URL(gw.url).port);
      await worker("deployer", () => ({ data: "deployed after restart" }));
      orchWithApprovals.addAgent({ id: "deployer", remote: client });
      const run = orchWithApprovals.send(
        orchWithApprovals.command({ to: "deployer", action: "EXECUTE", priority: "critical" }),
        {
          onApproval: (a) => requested.push(a),
        },
      );
      await vi.waitFor(() => expect(requested).toHaveLength(1));
      await gw.gateway.close();
      const restarted = await startTestGateway({ dataDir, port });
      cleanups.push(() => restarted.close());
      const adminAfter = new HttpApprovalStore({ gateway: restarted.url, credential: restarted.adminToken });
      const [pending] = await adminAfter.list({ status: "pending" });
      expect(pending?.id).toBe(requested[0]?.id);
      await adminAfter.decide(pending!.id, { decision: "approved", by: "alice" });
      expect((await run).results.data).toBe("deployed after restart");
    });
  });
});
