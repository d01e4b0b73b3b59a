import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import { writeIdentityFile } from "../../src/identity/index.js";
import { PrincipalAdminClient } from "../../src/client/principals.js";
import {
  CommandError,
  type CommandHandler,
  HttpApprovalStore,
  Orchestrator,
  SqliteApprovalStore,
  serveCommands,
} from "../../src/orchestration/index.js";
import { runAcp } from "../helpers/cli.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-command-cli-");

// Each test spawns several `acp` processes; on a loaded 2-core machine that takes a while.
describe("acp command … (the real binary against a real gateway)", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let dir: string;
  let env: Record<string, string>;
  const cleanups: (() => Promise<unknown>)[] = [];
  const seen: { agent: string; parameters: Record<string, unknown> }[] = [];

  async function worker(
    id: string,
    handler: CommandHandler,
    capabilities: string[] = [],
  ): Promise<TestAgent> {
    const registered = await gw.register(id, `owner-of-${id}`, { capabilities });
    const agent = new AcpAgent({
      gateway: gw.url,
      identity: registered.identity,
      apiKey: registered.apiKey,
      audit: { root: join(dir, "worker-audit") },
      state: { root: join(dir, "worker-state") },
    });
    agent.on("error", () => undefined);
    serveCommands(agent, (command, context) => {
      seen.push({ agent: id, parameters: command.parameters });
      return handler(command, context);
    });
    await agent.connect();
    cleanups.push(() => agent.close());
    return registered;
  }

  const acp = (args: string[], timeoutMs = 25_000) => runAcp(args, { env, cwd: dir, timeoutMs });

  beforeEach(async () => {
    dir = tmp();
    seen.length = 0;
    gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const me = await gw.register("cli-orchestrator", "carol");
    const keyFile = join(dir, "cli-orchestrator.key.json");
    await writeIdentityFile(keyFile, me.identity);
    env = {
      ACP_GATEWAY: gw.url,
      ACP_KEY: keyFile,
      ACP_API_KEY: me.apiKey,
      ACP_ADMIN_TOKEN: gw.adminToken,
      ACP_APPROVALS_STORE: "",
    };
    // No acp.yaml in the working directory: the command layer's defaults (approval_threshold high).
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it("send: prints the agent's response; parameters are JSON when they parse", async () => {
    await worker("code-agent", (command) => ({ data: { got: command.parameters }, summary: "looked at it" }));
    const result = await acp([
      "command",
      "send",
      "--to",
      "code-agent",
      "--action",
      "ANALYZE",
      "--param",
      "file=src/main.ts",
      "--param",
      'checks=["complexity","security"]',
      "--param",
      "depth=2",
    ]);
    expect(result.stderr).toContain("sending ANALYZE to code-agent");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^success from code-agent in \d+ ms \(command [0-9a-f-]{36}\)\nsummary: looked at it\n/,
    );
    expect(seen[0]?.parameters).toEqual({
      file: "src/main.ts",
      checks: ["complexity", "security"],
      depth: 2,
    });

    const json = await acp(["command", "send", "--to", "code-agent", "--action", "TEST", "--json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ version: "2.0", from: "code-agent", status: "success" });
  });

  it("send: invalid flags are named, and a failed command exits 1 with its category", async () => {
    await worker("code-agent", () => {
      throw new CommandError("agent_error", "the repository is locked");
    });
    const invalid = await acp([
      "command",
      "send",
      "--to",
      "code-agent",
      "--action",
      "DESTROY",
      "--priority",
      "asap",
    ]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/acp: --priority: Invalid option: .*; --action: Invalid option/);
    const badParam = await acp([
      "command",
      "send",
      "--to",
      "code-agent",
      "--action",
      "TEST",
      "--param",
      "novalue",
    ]);
    expect(badParam.stderr).toContain("acp: --param novalue: expected key=value");
    const failedRun = await acp(["command", "send", "--to", "code-agent", "--action", "TEST"]);
    expect(failedRun.code).toBe(1);
    expect(failedRun.stderr).toContain("acp: failed (agent_error): the repository is locked");
    const unknown = await acp(["command", "send", "--to", "nobody-here", "--action", "TEST"]);
    expect(unknown.stderr).toContain(`acp: no agent nobody-here is registered at ${gw.url}`);
  });

  it("send: a permission the target's registry entry does not grant is refused before sending", async () => {
    await worker("reader", () => ({ data: "read" }), ["fs:read"]);
    const denied = await acp([
      "command",
      "send",
      "--to",
      "reader",
      "--action",
      "EXECUTE",
      "--permission",
      "fs:write",
    ]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain(
      "acp: failed (permission_error): reader is not granted fs:write; the command was not sent",
    );
    expect(seen).toHaveLength(0);
    const allowed = await acp([
      "command",
      "send",
      "--to",
      "reader",
      "--action",
      "EXECUTE",
      "--permission",
      "fs:read",
    ]);
    expect(allowed.code).toBe(0);
  });

  it("a command needing approval waits until `acp approvals approve`, or fails on `deny`", async () => {
    await worker("deployer", () => ({ data: "deployed" }));
    /** The one pending approval's id, once the running `acp command send` has asked for it. */
    const waitForPending = async (run: Promise<{ code: number; stderr: string }>) => {
      let ended: { code: number; stderr: string } | undefined;
      void run.then((result) => {
        ended = result;
      });
      let id: string | undefined;
      await vi.waitFor(
        async () => {
          if (ended) throw new Error(`acp command send ended early (${ended.code}): ${ended.stderr}`);
          const listed = await acp(["approvals", "list", "--json"]);
          const approvals = JSON.parse(listed.stdout).approvals as { id: string }[];
          expect(approvals).toHaveLength(1);
          id = approvals[0]?.id;
        },
        { timeout: 25_000, interval: 300 },
      );
      return id!;
    };
    const approvedRun = acp(
      ["command", "send", "--to", "deployer", "--action", "EXECUTE", "--priority", "high"],
      60_000,
    );
    const first = await waitForPending(approvedRun);
    const human = await acp(["approvals", "list"]);
    expect(human.stdout).toContain(
      `${first}  pending  EXECUTE → deployer  priority high  asked by cli-orchestrator for carol`,
    );
    expect(human.stdout).toContain("why: priority high is at or above approval_threshold high");
    const approve = await acp(["approvals", "approve", first, "--by", "carol"]);
    expect(approve.stdout).toBe(`${first}: approved (EXECUTE → deployer)\n`);
    const approved = await approvedRun;
    // A wait of up to approval_timeout is announced on stdout, with the id to approve.
    expect(approved.stdout).toContain(
      `waiting for approval ${first} (priority high is at or above approval_threshold high), up to 15 min; approve with: acp approvals approve ${first}`,
    );
    expect(approved.code).toBe(0);
    expect(approved.stdout).toContain('"deployed"');

    const deniedRun = acp(
      ["command", "send", "--to", "deployer", "--action", "EXECUTE", "--require-approval"],
      60_000,
    );
    const second = await waitForPending(deniedRun);
    expect((await acp(["approvals", "deny", second, "--reason", "not today"])).code).toBe(0);
    const denied = await deniedRun;
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain(`acp: failed (permission_error): approval ${second} was denied by `);
    expect(denied.stderr).toContain(": not today");
    expect(seen).toHaveLength(1);
    const again = await acp(["approvals", "approve", second]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`approval ${second} is already denied`);
  });

  it("broadcast, scatter and pipeline from YAML files", async () => {
    await worker("agent-1", () => ({ data: { lint: 1 } }));
    await worker("agent-2", () => ({ data: { types: 0 } }));
    await worker("agent-3", () => {
      throw new CommandError("agent_error", "crashed");
    });
    writeFileSync(
      join(dir, "broadcast.yaml"),
      "targets: [agent-1, agent-2, agent-3]\naction: VALIDATE\nparameters: { rule: strict }\n",
    );
    const broadcast = await acp(["command", "broadcast", "broadcast.yaml"]);
    expect(broadcast.code).toBe(2);
    expect(broadcast.stdout).toMatch(/agent-3\s+failed\s+\d+ ms\s+agent_error: crashed/);
    expect(broadcast.stdout).toContain("partial: 2 of 3 succeeded");
    expect(broadcast.stderr).toMatch(/\[3\/3\] agent-\d: /);

    writeFileSync(
      join(dir, "scatter.yaml"),
      "defaults: { action: ANALYZE }\ncommands:\n  - to: agent-1\n  - to: agent-2\n  - to: agent-3\nmin_success: 2\naggregate: merge\n",
    );
    const scatter = await acp(["command", "scatter", "scatter.yaml", "--json"]);
    expect(scatter.code).toBe(2);
    expect(JSON.parse(scatter.stdout)).toMatchObject({ status: "partial", result: { lint: 1, types: 0 } });

    writeFileSync(
      join(dir, "pipeline.yaml"),
      "steps:\n  - { to: agent-1, action: DESIGN, parameters: { spec: s } }\n  - { to: agent-2, action: IMPLEMENT, input: design }\n",
    );
    const pipeline = await acp(["command", "pipeline", "pipeline.yaml"]);
    expect(pipeline.code).toBe(0);
    expect(pipeline.stdout).toContain("success: 2 of 2 succeeded");
    expect(seen.filter((s) => s.agent === "agent-2").at(-1)?.parameters).toEqual({ design: { lint: 1 } });

    writeFileSync(join(dir, "bad.yaml"), "targets: [agent-1]\naction: VALIDATE\npriorty: high\n");
    const bad = await acp(["command", "broadcast", "bad.yaml"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("acp: bad.yaml:3: priorty: unknown key\n");
  });

  it("a bad acp.yaml is an error naming the file, line and key", async () => {
    writeFileSync(join(dir, "acp.yaml"), "acp:\n  retry:\n    max_attempts: many\n");
    const result = await acp(["command", "send", "--to", "x", "--action", "TEST"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe("acp: acp.yaml:3: acp.retry.max_attempts: must be a whole number\n");
  });
});

describe("acp approvals with a local store", { timeout: 60_000 }, () => {
  it("lists and decides the approvals of a standalone orchestrator", async () => {
    const dir = tmp();
    const file = join(dir, "approvals.db");
    const store = SqliteApprovalStore.open(file, { pollMs: 20 });
    const orch = new Orchestrator({
      id: "standalone",
      audit: false,
      approvals: store,
      config: { security: { approval_threshold: "critical" } },
    });
    orch.addAgent({ id: "local-worker", handler: () => ({ data: "ran" }) });
    const ids: string[] = [];
    const run = orch.send(
      orch.command({
        to: "local-worker",
        action: "REFACTOR",
        priority: "critical",
        parameters: { scope: "all" },
      }),
      {
        onApproval: (a) => ids.push(a.id),
      },
    );
    await vi.waitFor(() => expect(ids).toHaveLength(1));
    const env = { ACP_GATEWAY: "", ACP_ADMIN_TOKEN: "", ACP_APPROVALS_STORE: "" };
    const listed = await runAcp(["approvals", "list", "--store", file], { env, cwd: dir });
    expect(listed.stdout).toContain(
      `${ids[0]}  pending  REFACTOR → local-worker  priority critical  asked by standalone`,
    );
    expect(listed.stdout).toContain('parameters: {"scope":"all"}');
    const approved = await runAcp(["approvals", "approve", ids[0]!, "--store", file, "--json"], {
      env,
      cwd: dir,
    });
    expect(JSON.parse(approved.stdout)).toMatchObject({ status: "approved" });
    expect((await run).results.data).toBe("ran");
    const all = await runAcp(["approvals", "list", "--store", file, "--all", "--json"], { env, cwd: dir });
    expect(JSON.parse(all.stdout).approvals).toHaveLength(1);
    expect((await runAcp(["approvals", "list", "--store", file], { env, cwd: dir })).stdout).toBe(
      `no pending approvals at ${file}\n`,
    );
    await store.close();
  });

  it("without a gateway or a store it says what to give", async () => {
    const result = await runAcp(["approvals", "list"], {
      env: { ACP_GATEWAY: "", ACP_ADMIN_TOKEN: "", ACP_APPROVALS_STORE: "" },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "no approvals given: pass --gateway URL with --principal-token or --admin-token",
    );
  });
});

describe("acp approvals with a principal token", { timeout: 90_000 }, () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it("a principal lists, shows, approves and denies its own agents' approvals, and sees no one else's", async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const asker = await gw.register("carols-agent", "carol");
    const stranger = await gw.register("daves-agent", "dave");
    const ask = async (agent: TestAgent, action: "EXECUTE" | "REFACTOR") =>
      new HttpApprovalStore({ gateway: gw.url, credential: agent.apiKey }).create({
        command: new Orchestrator({ id: agent.identity.agentId, audit: false }).command({
          to: "deployer",
          action,
        }),
        fallbacks: [],
        reason: `${action} needs a human`,
        requestedBy: agent.identity.agentId,
        principal: "ignored: the gateway sets it",
        timeoutMs: 600_000,
      });
    const first = await ask(asker, "EXECUTE");
    const second = await ask(asker, "REFACTOR");
    const others = await ask(stranger, "EXECUTE");
    const admin = new PrincipalAdminClient({ gateway: gw.url, adminToken: gw.adminToken });
    const carol = (await admin.add("carol")).token;
    const env = {
      ACP_GATEWAY: gw.url,
      ACP_PRINCIPAL_TOKEN: carol,
      ACP_ADMIN_TOKEN: "",
      ACP_APPROVALS_STORE: "",
    };
    const acp = (args: string[]) => runAcp(["approvals", ...args], { env });

    const listed = await acp(["list", "--json"]);
    expect(listed.code).toBe(0);
    // Oldest first, as with the admin token; dave's approval is not carol's to see.
    expect(JSON.parse(listed.stdout).approvals.map((a: { id: string }) => a.id)).toEqual([
      first.id,
      second.id,
    ]);
    expect((await acp(["list"])).stdout).toContain(`${first.id}  pending  EXECUTE → deployer`);
    expect((await acp(["show", first.id])).stdout).toContain("why: EXECUTE needs a human");
    const hidden = await acp(["show", others.id]);
    expect(hidden.code).toBe(1);
    expect(hidden.stderr).toContain(`no approval ${others.id}`);
    const notHers = await acp(["approve", others.id]);
    expect(notHers.code).toBe(1);
    expect(notHers.stderr).toContain(`no approval ${others.id}`);

    const approved = await acp(["approve", first.id, "--note", "go", "--json"]);
    expect(JSON.parse(approved.stdout)).toMatchObject({
      status: "approved",
      decidedBy: "principal:carol",
      note: "go",
    });
    const byOther = await acp(["deny", second.id, "--by", "mallory"]);
    expect(byOther.code).toBe(1);
    expect(byOther.stderr).toContain("--by is not taken with a principal token");
    // A flag beats the environment: the admin token given on the command line is used.
    const both = await runAcp(
      ["approvals", "list", "--admin-token", gw.adminToken, "--principal-token", carol],
      {
        env,
      },
    );
    expect(both.stderr).toContain("give either --principal-token or --admin-token, not both");
    expect((await acp(["deny", second.id, "--reason", "not today"])).stdout).toBe(
      `${second.id}: denied (REFACTOR → deployer)\n`,
    );
    expect((await acp(["list"])).stdout).toBe(`no pending approvals at ${gw.url}\n`);
    expect(
      await new HttpApprovalStore({ gateway: gw.url, credential: stranger.apiKey }).get(others.id),
    ).toMatchObject({
      status: "pending",
    });

    await admin.revoke("carol");
    const revoked = await acp(["list"]);
    expect(revoked.code).toBe(1);
    expect(revoked.stderr).toContain("unknown or revoked principal token");
  });
});
