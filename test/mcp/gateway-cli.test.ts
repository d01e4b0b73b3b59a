import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import { AgentsClient, combineDeltas, type JsonValue, stdioClientTransport } from "../../src/mcp/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { startTestGateway, type TestAgent } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { type McpGatewayBed, shoutingWriter, until, useMcpGateway } from "../helpers/mcp-gateway.js";

const TASK = { completed: ["wrote chapter 1"], remaining: ["proofread chapter 1"], context: { pages: 12 } };

/** `acp mcp serve --gateway …` as a real child process over real stdio; its stderr is collected. */
function proxyTransport(bed: McpGatewayBed, agent: TestAgent, extra: string[] = []) {
  const transport = stdioClientTransport({
    command: process.execPath,
    args: [CLI_PATH, "mcp", "serve", "--gateway", bed.gw.url, "--api-key", agent.apiKey, ...extra],
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return { transport, stderr: () => stderr };
}

function keyFile(bed: McpGatewayBed, agent: TestAgent): string {
  const file = join(bed.dir, `${agent.identity.agentId}.key.json`);
  writeFileSync(file, JSON.stringify(agent.identity));
  return file;
}

describe("acp mcp serve --gateway over real stdio", () => {
  const bed = useMcpGateway({ idleTimeoutMs: 1_000 });

  it("lists and runs the gateway's agents, streaming deltas through", async () => {
    await shoutingWriter(bed);
    const desk = await bed.register("desk");
    const { transport } = proxyTransport(bed, desk);
    const client = await AgentsClient.connect(transport);
    bed.cleanup(() => client.close());
    expect(client.agentsCapability).toBe("top-level");
    expect((await client.listAgents()).map((a) => a.name)).toEqual(["desk", "writer", "writer/shout"]);
    const deltas: JsonValue[] = [];
    const output = await client.runAgent(
      "writer/shout",
      { words: ["a", "b", "c"] },
      { onDelta: (d) => deltas.push(d) },
    );
    expect(output).toEqual({ text: "A B C" });
    expect(deltas.slice(0, 3)).toEqual([{ text: "A" }, { text: " B" }, { text: " C" }]);
    expect(combineDeltas(deltas)).toEqual(output);
  });

  it("signs the task tools with --key-file, keeps the session alive with pings, and relays notifications", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["proofread"]);
    const bossCollab = new CollabClient({
      agent: boss.agent,
      identity: boss.test.identity,
      apiKey: boss.test.apiKey,
    });
    new CollabClient({
      agent: worker.agent,
      identity: worker.test.identity,
      apiKey: worker.test.apiKey,
    }).handoffs.onOffer(worker.agent, () => undefined);
    const { transport, stderr } = proxyTransport(bed, worker.test, [
      "--key-file",
      keyFile(bed, worker.test),
      "--ping-interval",
      "200",
    ]);
    const client = new Client({ name: "desktop", version: "1.0.0" }); // a stock client: it cannot sign
    const updated: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updated.push(n.params.uri);
    });
    await client.connect(transport);
    bed.cleanup(() => client.close());
    await client.subscribeResource({ uri: "tasks://pending" });

    // Idle for longer than the gateway's session timeout: the proxy's pings keep it open.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(bed.mcp.stats().sessions).toBe(1);

    const offered = await bossCollab.handoffs.offer("worker", TASK, {
      title: "Chapter 1",
      requires: ["proofread"],
    });
    await until(
      () => updated,
      (u) => u.includes("tasks://pending"),
      "the proxy relays tasks://pending updates",
    );
    const accept = await client.callTool({ name: "accept_task", arguments: { taskId: offered.handoffId } });
    expect(accept.isError).toBeFalsy();
    const done = await client.callTool({
      name: "submit_task_result",
      arguments: { taskId: offered.handoffId, result: { typos: 3 } },
    });
    expect(done.isError).toBeFalsy();
    expect(await bossCollab.handoffs.get(offered.handoffId)).toMatchObject({
      status: "completed",
      result: { typos: 3 },
    });
    expect(stderr()).toContain(
      `signed agent.handoff.accept for task ${offered.handoffId} (Chapter 1) to boss`,
    );
    expect(stderr()).toContain(
      `signed agent.handoff.complete for task ${offered.handoffId} (Chapter 1) to boss`,
    );
  });

  it("without --key-file the task tools explain that a signature is needed", async () => {
    const boss = await bed.member("boss");
    const worker = await bed.member("worker", ["proofread"]);
    const bossCollab = new CollabClient({
      agent: boss.agent,
      identity: boss.test.identity,
      apiKey: boss.test.apiKey,
    });
    const offered = await bossCollab.handoffs.offer("worker", TASK, { requires: ["proofread"] });
    const { transport } = proxyTransport(bed, worker.test);
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await client.connect(transport);
    bed.cleanup(() => client.close());
    const result = await client.callTool({ name: "accept_task", arguments: { taskId: offered.handoffId } });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain("this MCP client cannot sign");
  });

  it("answers the desktop client with the gateway's refusal of a wrong API key", async () => {
    const { transport } = proxyTransport(bed, { apiKey: "acp_wrong" } as TestAgent);
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await expect(client.connect(transport)).rejects.toThrow(
      "the gateway refused it: HTTP 401: unknown or revoked API key",
    );
    await client.close();
  });

  it("rejects bad options naming what is wrong", async () => {
    const agent = await bed.register("someone");
    const badKey = join(bed.dir, "bad.json");
    writeFileSync(badKey, JSON.stringify({ agentId: "someone" }));
    const cases: [string[], string][] = [
      [
        ["mcp", "serve", "--gateway", bed.gw.url],
        "acp: --gateway needs the agent's API key: --api-key KEY or ACP_API_KEY\n",
      ],
      [
        ["mcp", "serve", "--gateway", "http://127.0.0.1:1", "--api-key", agent.apiKey],
        "acp: cannot reach the gateway at http://127.0.0.1:1",
      ],
      [
        ["mcp", "serve", "--gateway", "not a url", "--api-key", "k"],
        'acp: --gateway: "not a url" is not a URL\n',
      ],
      [
        ["mcp", "serve", "--gateway", bed.gw.url, "--api-key", "k", "--demo"],
        "acp: --gateway serves what the gateway offers: leave out --demo and --coordination-root\n",
      ],
      [
        ["mcp", "serve", "--demo", "--key-file", badKey],
        "acp: --key-file signs for a gateway's task tools: use it with --gateway URL\n",
      ],
      [
        ["mcp", "serve", "--gateway", bed.gw.url, "--api-key", "k", "--key-file", badKey],
        `acp: --key-file: ${badKey}: field`,
      ],
      [
        ["mcp", "serve", "--gateway", bed.gw.url, "--api-key", "k", "--layers", "0,x"],
        "expected comma-separated non-negative integers",
      ],
    ];
    for (const [args, message] of cases) {
      const result = await runAcp(args, { env: { ACP_API_KEY: "" } });
      expect(result.code, args.join(" ")).not.toBe(0);
      expect(result.stderr, args.join(" ")).toContain(message);
    }
  });
});

/** `acp mcp serve --gateway` as a child process speaking raw stdio, with an initialized session. */
async function startProxy(bed: McpGatewayBed, agent: TestAgent) {
  const child = spawn(
    process.execPath,
    [CLI_PATH, "mcp", "serve", "--gateway", bed.gw.url, "--api-key", agent.apiKey],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  bed.cleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const initialize = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "desk", version: "1" } },
  };
  child.stdin.write(`${JSON.stringify(initialize)}\n`);
  await until(
    () => stdout,
    (text) => text.includes('"id":1'),
    "the proxy answered initialize",
  );
  child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
  await until(
    () => bed.mcp.stats().sessions,
    (n) => n === 1,
    "the gateway holds the proxy's session",
  );
  return { child, exited, stderr: () => stderr };
}

describe("acp mcp serve --gateway stops when its client goes away", () => {
  const bed = useMcpGateway();

  it("exits, closing its gateway session, when stdin ends", async () => {
    const proxy = await startProxy(bed, await bed.register("desk"));
    proxy.child.stdin.end();
    expect(await proxy.exited).toEqual([0, null]);
    expect(proxy.stderr()).toContain("the MCP client closed stdin: closing the gateway session and exiting");
    await until(
      () => bed.mcp.stats().sessions,
      (n) => n === 0,
      "the gateway closed the session",
    );
  }, 30_000);

  it("exits on SIGTERM", async () => {
    const proxy = await startProxy(bed, await bed.register("desk"));
    proxy.child.kill("SIGTERM");
    expect(await proxy.exited).toEqual([0, null]);
    expect(proxy.stderr()).toContain("SIGTERM: closing the gateway session and exiting");
    await until(
      () => bed.mcp.stats().sessions,
      (n) => n === 0,
      "the gateway closed the session",
    );
  }, 30_000);

  it("exits when the MCP SDK's StdioClientTransport closes", async () => {
    const desk = await bed.register("desk");
    const { transport, stderr } = proxyTransport(bed, desk);
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await client.connect(transport);
    await client.listTools();
    // The SDK ends stdin, then sends SIGTERM (and SIGKILL) to a process that is still there.
    const child = (transport as unknown as { _process: ChildProcess })._process;
    const exited = once(child, "exit");
    await client.close();
    expect(await exited).toEqual([0, null]);
    expect(stderr()).toContain("the MCP client closed stdin: closing the gateway session and exiting");
  }, 30_000);
});

describeWithNats("acp mcp serve --gateway, gateway degraded", () => {
  const nats = useNatsServer();

  it("warns, naming the gateway's own reason, when its /healthz says degraded", async () => {
    const server = await nats();
    const gw = await startTestGateway({ natsUrl: server.url });
    try {
      const agent = await gw.register("desk");
      // Seen once while NATS is up, the key is then authenticated from the gateway's memory.
      expect(
        (await fetch(`${gw.url}/api/v1/agents/desk`, { headers: { "x-api-key": agent.apiKey } })).status,
      ).toBe(200);
      await server.stop("SIGKILL");
      await expect.poll(async () => (await fetch(`${gw.url}/healthz`)).status).toBe(503);
      const result = await runAcp(["mcp", "serve", "--gateway", gw.url, "--api-key", agent.apiKey], {
        input: "",
      });
      expect(result.stderr).toMatch(
        new RegExp(`warning: the gateway at ${gw.url} reports itself degraded \\(.*unreachable`),
      );
    } finally {
      // NATS is gone, so closing cannot flush: what it reports is not this test's subject.
      await gw.close().catch(() => undefined);
    }
    // The proxy's calls each wait out NATS's 5 s request timeout before the gateway answers 503.
  }, 90_000);
});
