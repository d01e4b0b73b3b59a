import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ProgressNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { AgentsClient, combineDeltas, type JsonValue, stdioClientTransport } from "../../src/mcp/index.js";
import { CLI_PATH } from "../helpers/cli.js";
import { rejectionOf } from "./helpers.js";

/** `acp mcp serve --demo` as a real child process, with its stderr collected. */
function demoServer(...extraArgs: string[]): { transport: StdioClientTransport; stderr: () => string } {
  const transport = stdioClientTransport({
    command: process.execPath,
    args: [CLI_PATH, "mcp", "serve", "--demo", ...extraArgs],
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  return { transport, stderr: () => stderr };
}

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const client of open.splice(0)) await client.close();
});

async function connectDemo(...extraArgs: string[]): Promise<{ client: AgentsClient; stderr: () => string }> {
  const server = demoServer(...extraArgs);
  const client = await AgentsClient.connect(server.transport);
  open.push(client);
  return { client, stderr: server.stderr };
}

describe("acp mcp serve --demo over real stdio", () => {
  it("declares agents at the top level (raw result) and under experimental (stock SDK client)", async () => {
    const { client } = await connectDemo();
    expect(client.agentsCapability).toBe("top-level");
    expect(client.serverCapabilities).toMatchObject({ agents: {}, experimental: { agents: {} } });

    const stock = new Client({ name: "stock", version: "1" });
    await stock.connect(demoServer().transport);
    open.push(stock);
    expect(stock.getServerCapabilities()?.experimental).toEqual({ agents: {} });
  });

  it("lists the demo agents across pages", async () => {
    const { client } = await connectDemo("--page-size", "2");
    const first = await client.listAgentsPage();
    expect(first.agents.map((a) => a.name)).toEqual(["echo", "count"]);
    expect(first.nextCursor).toBeDefined();
    const second = await client.listAgentsPage(first.nextCursor);
    expect(second).toEqual({ agents: [expect.objectContaining({ name: "summarize-text" })] });
    expect((await client.listAgents()).map((a) => a.name)).toEqual(["echo", "count", "summarize-text"]);
  });

  it("runs without a progressToken", async () => {
    const { client } = await connectDemo();
    expect(await client.runAgent("echo", { text: "Howdy!" })).toEqual({ text: "Howdy!" });
  });

  it("streams deltas that combine to the output (array appends, then text plus an unstreamed key)", async () => {
    const { client } = await connectDemo();
    const countDeltas: JsonValue[] = [];
    const counted = await client.runAgent(
      "count",
      { to: 4, delayMs: 0 },
      { onDelta: (d) => countDeltas.push(d) },
    );
    expect(counted).toEqual({ numbers: [1, 2, 3, 4] });
    expect(countDeltas).toEqual([1, 2, 3, 4].map((n) => ({ numbers: [null, n] })));

    const textDeltas: JsonValue[] = [];
    const text = "Rain fell. Rain fell on the roofs of the town. The town slept.";
    const summary = await client.runAgent(
      "summarize-text",
      { text, maxSentences: 1 },
      {
        onDelta: (d) => textDeltas.push(d),
      },
    );
    expect(summary).toEqual({ summary: "Rain fell.", sentences: 1 });
    expect(textDeltas.length).toBeGreaterThan(1);
    expect(combineDeltas(textDeltas)).toEqual(summary);
  });

  it("answers invalid input and unknown agents with -32602", async () => {
    const { client } = await connectDemo();
    const invalid = await rejectionOf(client.runAgent("count", { to: 0 }));
    expect(invalid.code).toBe(-32602);
    expect(invalid.message).toBe('invalid input for agent "count": to: Too small: expected number to be >=1');
    expect(invalid.data).toMatchObject({ agent: "count", issues: [{ path: ["to"], code: "too_small" }] });
    const unknown = await rejectionOf(client.runAgent("nope", {}));
    expect(unknown.code).toBe(-32602);
    expect(unknown.message).toBe('unknown agent "nope"');
    expect(unknown.data).toMatchObject({ problems: [{ path: "/params/name" }] });
  });

  it("answers bad params of the SDK's own methods -32602 naming the field, and unserved ones -32601", async () => {
    const stock = new Client({ name: "stock", version: "1" });
    await stock.connect(demoServer().transport);
    open.push(stock);
    const send = (method: string, params: unknown) =>
      rejectionOf(stock.request({ method, params } as never, z.unknown()));
    const initialize = await send("initialize", { protocolVersion: 1, capabilities: {}, clientInfo: {} });
    expect(initialize.code).toBe(-32602);
    expect(initialize.data).toEqual({
      reason: "InvalidParams",
      problems: [
        { path: "/params/protocolVersion", message: "Invalid input: expected string, received number" },
        { path: "/params/clientInfo/name", message: "Invalid input: expected string, received undefined" },
        { path: "/params/clientInfo/version", message: "Invalid input: expected string, received undefined" },
      ],
    });
    const list = await send("agents/list", { cursor: 5 });
    expect(list.code).toBe(-32602);
    expect(list.data).toMatchObject({ problems: [{ path: "/params/cursor" }] });
    // The demo's tools are its agents (list_agents, ask_agent): a bad name is -32602 too.
    const call = await send("tools/call", { name: 5 });
    expect(call.code).toBe(-32602);
    expect(call.data).toMatchObject({ problems: [{ path: "/params/name" }] });
    // It serves no logging: not found, whatever the params.
    expect((await send("logging/setLevel", { level: "loud" })).code).toBe(-32601);
  });

  it("cancels mid-stream: the agent's signal fires in the server process", async () => {
    const { client, stderr } = await connectDemo();
    const cancel = new AbortController();
    const error = await rejectionOf(
      client.runAgent(
        "count",
        { to: 10_000, delayMs: 20 },
        {
          signal: cancel.signal,
          onDelta: (_delta, accumulated) => {
            if ((accumulated as { numbers: number[] }).numbers.length === 2) cancel.abort(new Error("stop"));
          },
        },
      ),
    );
    expect(error.message).toBe("stop");
    await expect.poll(stderr, { timeout: 10_000 }).toMatch(/run count cancelled after \d+ deltas/);
    expect(stderr()).not.toMatch(/run count completed/);
  });

  it("a stock SDK client can run agents, passing its own progressToken", async () => {
    const stock = new Client({ name: "stock", version: "1" });
    await stock.connect(demoServer().transport);
    open.push(stock);
    const deltas: JsonValue[] = [];
    const progress: number[] = [];
    stock.fallbackNotificationHandler = async (notification) => {
      if (notification.method === "notifications/agents/run/progress")
        deltas.push(notification.params?.delta as JsonValue);
    };
    stock.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      progress.push(notification.params.progress);
    });
    const result = await stock.request(
      {
        method: "agents/run",
        params: { name: "count", input: { to: 3, delayMs: 0 }, _meta: { progressToken: 7 } },
      } as never,
      z.object({ output: z.json() }),
    );
    expect(result.output).toEqual({ numbers: [1, 2, 3] });
    expect(combineDeltas(deltas)).toEqual(result.output);
    expect(progress).toEqual([1, 2, 3]);
  });
});
