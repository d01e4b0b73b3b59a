import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CollabClient } from "../../src/client/collab.js";
import { serveMcpAgent } from "../../src/client/mcp-agent.js";
import { AgentsClient, combineDeltas, type JsonValue, stdioClientTransport } from "../../src/mcp/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { startTestGateway, type TestAgent } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { type McpGatewayBed, until, useMcpGateway } from "./gateway-helpers.js";

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
    const { test, agent } = await bed.member("writer");
    await serveMcpAgent(
      agent,
      "shout",
      {
        description: "Upper-cases words",
        input: z.object({ words: z.array(z.string()) }),
        output: z.object({ text: z.string() }),
      },
      async ({ words }, { emit }) => {
        for (const [i, word] of words.entries()) await emit({ text: `${i ? " " : ""}${word.toUpperCase()}` });
        return { text: words.join(" ").toUpperCase() };
      },
      { apiKey: test.apiKey },
    );
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
