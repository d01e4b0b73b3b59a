import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { combineDeltas, type JsonValue, type McpHttpHost, serveMcpOverHttp } from "../../src/mcp/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";
import { testAgents, useAgentsHttpHost } from "./helpers.js";

const DEMO = ["--", process.execPath, CLI_PATH, "mcp", "serve", "--demo", "--quiet"];
const tmpDir = useTmpDir();
const startHost = useAgentsHttpHost();

function jsonLines(stdout: string): JsonValue[] {
  return stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as JsonValue);
}

describe("acp mcp call (stdio server)", () => {
  it("--list prints the agents, with their input and output at a glance", async () => {
    const result = await runAcp(["mcp", "call", "--list", ...DEMO]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      "count           Counts from 1 to `to`, streaming each number after `delayMs`",
    );
    expect(result.stdout).toContain("input {to: integer, delayMs?: integer} → output {numbers: integer[]}");
    expect(result.stdout).toContain("3 agents");
  });

  it("--list --json prints the descriptors with their JSON Schemas", async () => {
    const result = await runAcp(["mcp", "call", "--list", "--json", ...DEMO]);
    expect(result.code).toBe(0);
    const { agents } = JSON.parse(result.stdout) as { agents: { name: string; inputSchema: unknown }[] };
    expect(agents.map((a) => a.name)).toEqual(["echo", "count", "summarize-text"]);
    expect(agents[0]?.inputSchema).toMatchObject({ type: "object", required: ["text"] });
  });

  it("runs an agent printing each delta live (stderr) and the output (stdout)", async () => {
    const result = await runAcp(["mcp", "call", "count", "--input", '{"to":3,"delayMs":0}', ...DEMO]);
    expect(result.code).toBe(0);
    expect(result.stderr.trim().split("\n")).toEqual([
      'delta {"numbers":[null,1]}',
      'delta {"numbers":[null,2]}',
      'delta {"numbers":[null,3]}',
    ]);
    expect(JSON.parse(result.stdout)).toEqual({ numbers: [1, 2, 3] });
  });

  it("--json prints one {delta} per line then {output}; the deltas combine to the output", async () => {
    const dir = tmpDir();
    const inputFile = join(dir, "input.json");
    writeFileSync(
      inputFile,
      JSON.stringify({ text: "One fish. Two fish. Red fish. Blue fish.", maxSentences: 2 }),
    );
    const result = await runAcp([
      "mcp",
      "call",
      "summarize-text",
      "--input-file",
      inputFile,
      "--json",
      ...DEMO,
    ]);
    expect(result.code).toBe(0);
    const lines = jsonLines(result.stdout) as { delta?: JsonValue; output?: JsonValue }[];
    const output = lines.at(-1)?.output;
    expect(output).toEqual({ summary: "One fish. Two fish.", sentences: 2 });
    expect(combineDeltas(lines.slice(0, -1).map((line) => line.delta as JsonValue))).toEqual(output);
  });

  it("reports invalid input and unknown agents with the server's message (and JSON errors with --json)", async () => {
    const invalid = await runAcp(["mcp", "call", "echo", "--input", '{"text":1}', ...DEMO]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toBe(
      'acp: agents/run "echo" failed (-32602): invalid input for agent "echo": text: Invalid input: expected string, received number\n',
    );
    const unknown = await runAcp(["mcp", "call", "nope", "--json", ...DEMO]);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stdout)).toEqual({
      error: {
        code: -32602,
        message: 'unknown agent "nope"',
        data: {
          agent: "nope",
          reason: "InvalidParams",
          problems: [{ path: "/params/name", message: 'no agent named "nope"' }],
        },
      },
    });
  });

  it("rejects bad command lines, naming the option at fault", async () => {
    const cases: [string[], string][] = [
      [
        ["mcp", "call", "--list"],
        "which MCP server? pass --url URL, or -- COMMAND [ARGS…] to start one over stdio",
      ],
      [["mcp", "call", ...DEMO], "name an agent to run, or pass --list"],
      [["mcp", "call", "echo", "--list", ...DEMO], "give either --list or an agent to run, not both"],
      [["mcp", "call", "echo", "--input", "{nope", ...DEMO], "--input: not valid JSON"],
      [["mcp", "call", "echo", "extra", ...DEMO], "expected one agent name, got: echo extra"],
      [["mcp", "call", "--list", "--url", "not a url"], '--url: "not a url" is not a valid URL'],
      [["mcp", "call", "--list", "--", join(tmpDir(), "no-such-server")], "cannot connect to the MCP server"],
      [["mcp", "serve"], "nothing to serve: pass --demo"],
    ];
    for (const [args, message] of cases) {
      const result = await runAcp(args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr, args.join(" ")).toContain(message);
    }
    const badTimeout = await runAcp(["mcp", "call", "echo", "--timeout", "soon", ...DEMO]);
    expect(badTimeout.code).not.toBe(0);
    expect(badTimeout.stderr).toContain(
      "option '--timeout <ms>' argument 'soon' is invalid. must be a positive whole number",
    );
  });
});

describe("acp mcp call --url (Streamable HTTP)", () => {
  const hosts: McpHttpHost[] = [];
  afterEach(async () => {
    for (const host of hosts.splice(0)) await host.close();
  });

  it("lists and runs agents of an HTTP server, streaming deltas", async () => {
    const { host } = await startHost(testAgents());
    const list = await runAcp(["mcp", "call", "--list", "--json", "--url", host.url]);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { agents: unknown[] }).agents).toHaveLength(7);
    const run = await runAcp(["mcp", "call", "gpa", "--input", '{"text":"hi"}', "--json", "--url", host.url]);
    expect(run.code).toBe(0);
    expect(jsonLines(run.stdout)).toEqual([
      { delta: { text: "Howd" } },
      { delta: { text: "y back" } },
      { delta: { text: " at ya! (hi)" } },
      { output: { text: "Howdy back at ya! (hi)" } },
    ]);
  });

  it("refuses a server that does not declare the agents capability", async () => {
    const host = await serveMcpOverHttp({
      createServer: () => {
        const plain = new McpServer({ name: "plain", version: "1" });
        plain.registerTool("echo", { inputSchema: { text: z.string() } }, ({ text }) => ({
          content: [{ type: "text", text }],
        }));
        return plain;
      },
    });
    hosts.push(host);
    const result = await runAcp(["mcp", "call", "--list", "--url", host.url]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "acp: the MCP server does not declare the agents capability (it declares: tools)\n",
    );
  });

  it("says so when nothing listens at the URL", async () => {
    const host = await serveMcpOverHttp({
      createServer: () => new McpServer({ name: "gone", version: "1" }),
    });
    const url = host.url;
    await host.close();
    const result = await runAcp(["mcp", "call", "--list", "--url", url]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`acp: cannot connect to the MCP server (${url}):`);
  });
});
