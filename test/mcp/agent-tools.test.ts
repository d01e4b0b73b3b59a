/**
 * The gateway's agents as MCP tools (`list_agents`, `ask_agent`), as a host that shows a model only
 * tools reaches them: the stock MCP SDK client using nothing but tools/list and tools/call (over
 * Streamable HTTP, and through `acp mcp serve --gateway` over stdio), and MCP Inspector's CLI.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { combineDeltas, type JsonValue, stdioClientTransport } from "../../src/mcp/index.js";
import { CLI_PATH } from "../helpers/cli.js";
import { type McpGatewayBed, shoutingWriter, useMcpGateway } from "../helpers/mcp-gateway.js";

/** `writer/shout` streams a word at a time; `writer` itself answers plain requests. */
async function writer(bed: McpGatewayBed): Promise<void> {
  const agent = await shoutingWriter(bed);
  agent.onRequest("agent.request", (body) => ({ text: `got: ${String(body.text)}` }));
}

/** The progress notifications the transport delivers, seen before the SDK dispatches them. */
function recordProgress(transport: Transport): { params: Record<string, unknown> }[] {
  const seen: { params: Record<string, unknown> }[] = [];
  const sdk = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage, extra) => {
    if ("method" in message && message.method === "notifications/progress")
      seen.push({ params: message.params as Record<string, unknown> });
    sdk?.(message, extra);
  };
  return seen;
}

const textOf = (result: CallToolResult) =>
  result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

describe("the gateway's agents as MCP tools, for hosts that show a model only tools", () => {
  const bed = useMcpGateway({ runTimeoutMs: 15_000 });

  it("lists the agents with list_agents and runs one with ask_agent", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = await bed.sdkClient("streamable", caller.apiKey);
    const tools = (await client.listTools()).tools;
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["list_agents", "ask_agent"]));
    expect(tools.find((tool) => tool.name === "ask_agent")?.inputSchema).toMatchObject({
      properties: { name: { type: "string" } },
      required: ["name"],
    });

    const listed = (await client.callTool({ name: "list_agents", arguments: {} })) as CallToolResult;
    const names = (listed.structuredContent as { agents: { name: string }[] }).agents.map((a) => a.name);
    expect(names).toEqual(["caller", "writer", "writer/shout"]);
    expect(JSON.parse(textOf(listed))).toEqual(listed.structuredContent);

    // A string for an agent whose input is an object is sent as {text}.
    const asked = (await client.callTool({
      name: "ask_agent",
      arguments: { name: "writer", input: "hello" },
    })) as CallToolResult;
    expect(asked.isError).toBeFalsy();
    expect(asked.structuredContent).toEqual({ output: { text: "got: hello" } });
  });

  it("streams an agent's deltas as progress notifications, which combine to the output", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = new Client({ name: "host", version: "1.0.0" });
    await client.connect(bed.transport("streamable", caller.apiKey));
    bed.cleanup(() => client.close());
    const seen = recordProgress(client.transport as Transport);
    const result = (await client.callTool(
      { name: "ask_agent", arguments: { name: "writer/shout", input: { words: ["a", "b", "c"] } } },
      undefined,
      { onprogress: () => undefined },
    )) as CallToolResult;
    expect(result.structuredContent).toEqual({ output: { text: "A B C" } });
    const deltas = seen.map(({ params }) => JSON.parse(params.message as string) as JsonValue);
    expect(deltas.slice(0, 3)).toEqual([{ text: "A" }, { text: " B" }, { text: " C" }]);
    expect(combineDeltas(deltas)).toEqual({ text: "A B C" });
    expect(seen.map(({ params }) => params.progress)).toEqual(deltas.map((_, i) => i + 1));
  });

  it("answers what the model must correct as tool errors", async () => {
    await writer(bed);
    await bed.register("sleeper");
    const caller = await bed.register("caller");
    const client = await bed.sdkClient("streamable", caller.apiKey);
    const ask = async (args: Record<string, unknown>) =>
      (await client.callTool({ name: "ask_agent", arguments: args })) as CallToolResult;

    const unknown = await ask({ name: "nobody", input: {} });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toBe('unknown agent "nobody"; list_agents names the agents here');
    const badInput = await ask({ name: "writer/shout", input: { words: 5 } });
    expect(badInput.isError).toBe(true);
    expect(textOf(badInput)).toMatch(/^invalid input for agent "writer\/shout": words: .*expected array/);
    const offline = await ask({ name: "sleeper", input: { text: "hi" } });
    expect(offline.isError).toBe(true);
    expect(textOf(offline)).toContain("sleeper is offline (not connected to the gateway)");
    const noName = await ask({ input: {} });
    expect(noName.isError).toBe(true);
    expect(textOf(noName)).toContain("/params/arguments/name");
    const badCursor = (await client.callTool({
      name: "list_agents",
      arguments: { cursor: "nope" },
    })) as CallToolResult;
    expect(badCursor.isError).toBe(true);
    expect(textOf(badCursor)).toContain('invalid agents/list cursor "nope"');
  });

  it("offers the same tools through acp mcp serve --gateway, progress included", async () => {
    await writer(bed);
    const desk = await bed.register("desk");
    const transport = stdioClientTransport({
      command: process.execPath,
      args: [CLI_PATH, "mcp", "serve", "--gateway", bed.gw.url, "--api-key", desk.apiKey, "--quiet"],
      stderr: "pipe",
    });
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await client.connect(transport);
    bed.cleanup(() => client.close());
    const seen = recordProgress(transport);
    const result = (await client.callTool(
      { name: "ask_agent", arguments: { name: "writer/shout", input: { words: ["x", "y"] } } },
      undefined,
      { onprogress: () => undefined },
    )) as CallToolResult;
    expect(result.structuredContent).toEqual({ output: { text: "X Y" } });
    const deltas = seen.map(({ params }) => JSON.parse(params.message as string) as JsonValue);
    expect(combineDeltas(deltas)).toEqual({ text: "X Y" });
  }, 30_000);
});

/** MCP Inspector's CLI (`mcp-inspector --cli`), a devDependency: its JSON answer on stdout. */
function inspector(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve("@modelcontextprotocol/inspector/package.json"));
  const launcher = join(root, "clients", "launcher", "build", "index.js");
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [launcher, "--cli", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Inspector's arguments for `tools/call ask_agent` (its --tool-arg values are read as JSON when they parse). */
const askAgent = (name: string, input?: string) => [
  "--method",
  "tools/call",
  "--tool-name",
  "ask_agent",
  "--tool-arg",
  `name=${name}`,
  ...(input === undefined ? [] : [`input=${input}`]),
];

/** The first JSON value Inspector printed (it adds an error line after an isError result). */
const firstJson = (stdout: string) =>
  JSON.parse(stdout.slice(0, stdout.indexOf("\n}\n") + 2)) as CallToolResult;

describe("the gateway's agent tools in MCP Inspector's CLI", () => {
  const bed = useMcpGateway({ runTimeoutMs: 15_000 });

  it("lists the tools and asks an agent", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const target = [`${bed.gw.url}/mcp`, "--header", `X-API-Key: ${caller.apiKey}`];
    const listed = await inspector([...target, "--method", "tools/list"]);
    expect(listed.code, listed.stderr).toBe(0);
    const tools = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(["list_agents", "ask_agent"]));

    const asked = await inspector([...target, ...askAgent("writer/shout", '{"words":["inspected"]}')]);
    expect(asked.code, asked.stderr).toBe(0);
    expect(firstJson(asked.stdout).structuredContent).toEqual({ output: { text: "INSPECTED" } });

    const refused = await inspector([...target, ...askAgent("nobody")]);
    expect(firstJson(refused.stdout)).toMatchObject({
      isError: true,
      content: [{ type: "text", text: 'unknown agent "nobody"; list_agents names the agents here' }],
    });
  }, 60_000);

  it("runs acp mcp serve --demo's agents as tools", async () => {
    const demo = [process.execPath, CLI_PATH, "mcp", "serve", "--demo", "--quiet"];
    const asked = await inspector([...demo, ...askAgent("echo", "howdy")]);
    expect(asked.code, asked.stderr).toBe(0);
    expect(firstJson(asked.stdout).structuredContent).toEqual({ output: { text: "howdy" } });
  }, 60_000);
});
