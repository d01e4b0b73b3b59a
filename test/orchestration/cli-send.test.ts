/**
 * `acp command send` and the patterns, the real binary against a real gateway: fire-and-forget,
 * retry and cache flags, what the output says about attempts, cancellation, failed pipelines,
 * broadcast lists and a handler's internal failure.
 */
import { spawn } from "node:child_process";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import { writeIdentityFile } from "../../src/identity/index.js";
import { CommandError, type CommandHandler, serveCommands } from "../../src/orchestration/index.js";
import { deferred } from "../client/fixtures.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { delay } from "./helpers.js";

const tmp = useTmpDir("acp-command-send-");

describe("acp command send … (the real binary against a real gateway)", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let dir: string;
  let env: Record<string, string>;
  const cleanups: (() => Promise<unknown>)[] = [];
  const seen: { agent: string; id: string; at: number }[] = [];
  const incidents: { correlationId: string; detail: string }[] = [];

  async function worker(id: string, handler: CommandHandler): Promise<void> {
    const registered = await gw.register(id, `owner-of-${id}`);
    const agent = new AcpAgent({
      gateway: gw.url,
      identity: registered.identity,
      apiKey: registered.apiKey,
      audit: { root: join(dir, "worker-audit") },
      state: { root: join(dir, "worker-state") },
    });
    agent.on("error", () => undefined);
    serveCommands(
      agent,
      (command, context) => {
        seen.push({ agent: id, id: command.id, at: Date.now() });
        return handler(command, context);
      },
      {
        logInternalError: (err, { correlationId }) =>
          incidents.push({ correlationId, detail: (err as Error).message }),
      },
    );
    await agent.connect();
    cleanups.push(() => agent.close());
  }

  const acp = (args: string[], timeoutMs = 25_000) => runAcp(args, { env, cwd: dir, timeoutMs });

  beforeEach(async () => {
    dir = tmp();
    seen.length = 0;
    incidents.length = 0;
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
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it("--no-wait hands the command over and exits before the agent is done", async () => {
    // The agent is done only when the test ends: a CLI that waited for it would never exit.
    const done = deferred();
    await worker("logger", async () => {
      await done.promise;
      return { data: "logged" };
    });
    cleanups.push(async () => done.resolve());
    const result = await acp(["command", "send", "--to", "logger", "--action", "EXECUTE", "--no-wait"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^sent EXECUTE to logger \(command [0-9a-f-]{36}\)\n$/);
    const json = await acp([
      "command",
      "send",
      "--to",
      "logger",
      "--action",
      "EXECUTE",
      "--no-wait",
      "--json",
    ]);
    expect(JSON.parse(json.stdout)).toMatchObject({ accepted: true });
    const mixed = await acp([
      "command",
      "send",
      "--to",
      "logger",
      "--action",
      "EXECUTE",
      "--no-wait",
      "--fallback",
      "x",
    ]);
    expect(mixed).toMatchObject({
      code: 1,
      stderr: "acp: --fallback: not with --no-wait (there is no answer to judge)\n",
    });
  });

  it("--max-attempts and --backoff-ms retry; the output gives the whole time and the attempts", async () => {
    let calls = 0;
    await worker("flaky", () => {
      calls++;
      if (calls < 3) throw new CommandError("agent_error", "model overloaded", { recoverable: true });
      return { data: "ok" };
    });
    const result = await acp([
      "command",
      "send",
      "--to",
      "flaky",
      "--action",
      "ANALYZE",
      "--max-attempts",
      "3",
      "--backoff-ms",
      "400",
    ]);
    expect(result.code, result.stderr).toBe(0);
    const [, ms] = /^success from flaky in (\d+) ms after 3 attempts \(command /.exec(result.stdout) ?? [];
    // Waits of at least 200 and 400 ms (equal jitter) lie between the three attempts.
    expect(Number(ms)).toBeGreaterThanOrEqual(600);

    calls = -100;
    const failing = await acp([
      "command",
      "send",
      "--to",
      "flaky",
      "--action",
      "ANALYZE",
      "--max-attempts",
      "2",
      "--backoff-ms",
      "10",
    ]);
    expect(failing.code).toBe(1);
    expect(failing.stderr).toMatch(/\nacp: failed \(agent_error\) after 2 attempts: model overloaded\n$/);
    const bad = await acp(["command", "send", "--to", "flaky", "--action", "ANALYZE", "--max-attempts", "0"]);
    expect(bad.stderr).toMatch(/acp: --max-attempts: /);
  });

  it("--cacheable answers a repeat from the cache kept between runs", async () => {
    await worker("analyzer", () => ({ data: { complexity: 3 } }));
    const send = (...extra: string[]) =>
      acp(["command", "send", "--to", "analyzer", "--action", "ANALYZE", "--param", "file=a.ts", ...extra]);
    const first = await send("--cacheable");
    expect(first.code, first.stderr).toBe(0);
    const second = await send("--cacheable", "--json");
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({
      status: "success",
      results: { data: { complexity: 3 } },
    });
    expect(seen.filter((s) => s.agent === "analyzer")).toHaveLength(1);
    const cacheFile = join(dir, ".acp", "command-cache", "cli-orchestrator.json");
    expect(statSync(cacheFile).mode & 0o777).toBe(0o600);
    // Not marked cacheable: asked again.
    expect((await send()).code).toBe(0);
    expect(seen.filter((s) => s.agent === "analyzer")).toHaveLength(2);
  });

  it("a handler's internal error reaches the caller without its detail, with a correlation id", async () => {
    await worker("leaky", () => {
      throw new Error("ENOENT: /srv/secret/config.json");
    });
    const result = await acp(["command", "send", "--to", "leaky", "--action", "ANALYZE"]);
    expect(result.code).toBe(1);
    expect(result.stdout + result.stderr).not.toContain("secret");
    const [incident] = incidents;
    expect(incident?.detail).toBe("ENOENT: /srv/secret/config.json");
    expect(result.stderr).toContain(
      `\nacp: failed (agent_error): leaky failed with an internal error (correlation id ${incident?.correlationId})\n`,
    );
  });

  it("Ctrl-C cancels, saying so once", async () => {
    await worker("slow", async (_command, { signal }) => {
      await delay(20_000, signal);
      return {};
    });
    const child = spawn(process.execPath, [CLI_PATH, "command", "send", "--to", "slow", "--action", "TEST"], {
      cwd: dir,
      env: { ...process.env, ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    const sending = new Promise<void>((resolve) =>
      child.stderr.setEncoding("utf8").on("data", (d: string) => {
        stderr += d;
        if (stderr.includes("sending TEST")) resolve();
      }),
    );
    const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
    await sending;
    await until(
      () => seen,
      (commands) => commands.some((command) => command.agent === "slow"),
      "the agent has the command",
    );
    child.kill("SIGINT");
    expect(await closed).toBe(1);
    expect(stderr).toContain("acp: cancelled: interrupted (Ctrl-C)\n");
    expect(stderr + stdout).not.toContain("cancelled: cancelled:");
  });

  it("broadcast --json lists succeeded and failed; a failed pipeline names the step that never ran", async () => {
    await worker("agent-1", () => ({ data: 1 }));
    await worker("agent-2", () => {
      throw new CommandError("agent_error", "crashed");
    });
    await worker("agent-3", () => ({ data: 3 }));
    writeFileSync(join(dir, "broadcast.yaml"), "targets: [agent-1, agent-2]\naction: VALIDATE\n");
    const broadcast = await acp(["command", "broadcast", "broadcast.yaml", "--json"]);
    expect(broadcast.code).toBe(2);
    expect(JSON.parse(broadcast.stdout)).toMatchObject({
      status: "partial",
      succeeded: ["agent-1"],
      failed: ["agent-2"],
    });
    writeFileSync(
      join(dir, "pipeline.yaml"),
      "steps:\n  - { to: agent-1, action: DESIGN }\n  - { to: agent-2, action: IMPLEMENT }\n  - { to: agent-3, action: VALIDATE }\n",
    );
    const pipeline = await acp(["command", "pipeline", "pipeline.yaml"]);
    expect(pipeline.code).toBe(1);
    expect(pipeline.stdout).toMatch(/agent-3\s+not run\s+VALIDATE\n/);
    expect(pipeline.stdout).toContain("failed: 1 of 3 succeeded, 1 not run (step 3: agent-3 VALIDATE)\n");
    expect(pipeline.stderr).toContain(
      "acp: pipeline failed: 1 of 3 succeeded, 1 not run (step 3: agent-3 VALIDATE)\n",
    );
    expect(seen.filter((s) => s.agent === "agent-3")).toHaveLength(0);
  });
});
