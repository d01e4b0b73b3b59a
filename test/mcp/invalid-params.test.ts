/**
 * Bad params get -32602 with `data.problems` naming the field, for every method family our MCP
 * server (AgentsMcpServer, over real Streamable HTTP) answers; failures on valid params stay -32603.
 * Before params-guard.ts, the MCP SDK answered most of these -32603 (zod's issue list as the
 * message), "Invalid URL", or an `isError` tool result.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { completable } from "@modelcontextprotocol/sdk/server/completable.js";
import { ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AgentsClient,
  AgentsRpcError,
  createAgentsMcpServer,
  serveMcpOverHttp,
  streamableHttpClientTransport,
} from "../../src/mcp/index.js";
import { ResourceSubscriptions } from "../../src/mcp/subscriptions.js";
import { rejectionOf, testAgents } from "./helpers.js";

/** A server with one of everything: agents, a tool, a prompt, resources, completions, logging. */
function fullServer() {
  const server = createAgentsMcpServer({
    name: "full",
    version: "1.0.0",
    agents: testAgents(),
    capabilities: { logging: {} },
  });
  server.registerTool(
    "greet",
    { inputSchema: { peer: z.string().min(1), times: z.number().int().optional() } },
    async ({ peer }) => ({ content: [{ type: "text", text: `hello ${peer}` }] }),
  );
  server.registerPrompt(
    "ask",
    { argsSchema: { topic: completable(z.string().min(2), () => ["weather", "news"]) } },
    async ({ topic }) => ({ messages: [{ role: "user", content: { type: "text", text: topic } }] }),
  );
  server.registerResource("notes", "mem://notes", {}, async (uri) => ({
    contents: [{ uri: uri.href, text: "notes" }],
  }));
  server.registerResource("broken", "mem://broken", {}, async () => {
    throw new Error("the disk is on fire");
  });
  server.registerResource(
    "item",
    new ResourceTemplate("mem://items/{id}", { list: undefined, complete: { id: () => ["1", "2"] } }),
    {},
    async (uri) => ({ contents: [{ uri: uri.href, text: "item" }] }),
  );
  new ResourceSubscriptions(server).add(async (uri) => (uri === "mem://notes" ? () => undefined : undefined));
  return server;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function connect(): Promise<Client> {
  const host = await serveMcpOverHttp({ createServer: fullServer, enableJsonResponse: true });
  cleanups.push(() => host.close());
  const client = new Client({ name: "params-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(host.url)));
  cleanups.push(() => client.close());
  return client;
}

/** Sends `method` with `params` as they are (the SDK client does not check what it sends). */
function send(client: Client, method: string, params: unknown) {
  return client.request({ method, params } as never, z.unknown());
}

/** The request is refused -32602, with a problem at each of `paths` (and only there). */
async function expectInvalidParams(answer: Promise<unknown>, paths: string[], message?: RegExp) {
  const err = await rejectionOf(answer);
  expect(err.code, err.message).toBe(-32602);
  const data = err.data as { reason?: unknown; problems?: { path: string; message: string }[] };
  expect(data.reason).toBe("InvalidParams");
  expect((data.problems ?? []).map((problem) => problem.path).sort()).toEqual([...paths].sort());
  for (const problem of data.problems ?? []) expect(problem.message).not.toBe("");
  if (message !== undefined) expect(err.message).toMatch(message);
  // The message is ours, not zod's issue list as JSON.
  expect(err.message).not.toMatch(/\[\s*\{/);
}

type Case = [method: string, params: unknown, paths: string[], message?: RegExp];

interface RawAnswer {
  id?: unknown;
  error?: { code: number; message: string; data?: unknown };
  result?: { tools?: { name: string }[] };
}

describe("bad params at an AgentsMcpServer answer -32602 naming the field", () => {
  const families: Record<string, Case[]> = {
    "tools/call": [
      ["tools/call", { name: 5 }, ["/params/name"], /invalid tools\/call params: \/params\/name: /],
      ["tools/call", { arguments: {} }, ["/params/name"]],
      ["tools/call", { name: "nope", arguments: {} }, ["/params/name"], /unknown tool "nope"/],
      ["tools/call", { name: "constructor" }, ["/params/name"], /unknown tool "constructor"/],
      ["tools/call", { name: "greet", arguments: [] }, ["/params/arguments"]],
      ["tools/list", { cursor: 5 }, ["/params/cursor"]],
    ],
    resources: [
      ["resources/read", { uri: "not a uri" }, ["/params/uri"], /not an absolute URI/],
      ["resources/read", { uri: 5 }, ["/params/uri"]],
      ["resources/read", {}, ["/params/uri"]],
      [
        "resources/read",
        { uri: "mem://missing" },
        ["/params/uri"],
        /^MCP error -32602: Resource mem:\/\/missing not found$/,
      ],
      ["resources/subscribe", { uri: "::" }, ["/params/uri"]],
      ["resources/subscribe", { uri: ["mem://notes"] }, ["/params/uri"]],
      [
        "resources/subscribe",
        { uri: "mem://other" },
        ["/params/uri"],
        /not a resource this server can notify about/,
      ],
      ["resources/unsubscribe", { uri: null }, ["/params/uri"]],
      ["resources/list", { cursor: false }, ["/params/cursor"]],
      ["resources/templates/list", { cursor: {} }, ["/params/cursor"]],
    ],
    prompts: [
      ["prompts/get", { name: 1 }, ["/params/name"]],
      ["prompts/get", { name: "nope" }, ["/params/name"], /unknown prompt "nope"/],
      ["prompts/get", { name: "ask", arguments: { topic: 1 } }, ["/params/arguments/topic"]],
      [
        "prompts/get",
        { name: "ask", arguments: { topic: "x" } },
        ["/params/arguments/topic"],
        /invalid arguments for prompt "ask"/,
      ],
      ["prompts/get", { name: "ask" }, ["/params/arguments/topic"]],
      ["prompts/list", { cursor: 1 }, ["/params/cursor"]],
    ],
    "completion/complete": [
      [
        "completion/complete",
        { ref: { type: "ref/nothing" }, argument: { name: "a", value: "" } },
        ["/params/ref"],
      ],
      ["completion/complete", { ref: { type: "ref/prompt", name: "ask" } }, ["/params/argument"]],
      [
        "completion/complete",
        { ref: { type: "ref/prompt", name: "ask" }, argument: { name: 1, value: "" } },
        ["/params/argument/name"],
      ],
      [
        "completion/complete",
        { ref: { type: "ref/prompt", name: "nope" }, argument: { name: "topic", value: "" } },
        ["/params/ref"],
        /Prompt nope not found/,
      ],
      [
        "completion/complete",
        { ref: { type: "ref/resource", uri: "mem://x/{y}" }, argument: { name: "y", value: "" } },
        ["/params/ref"],
      ],
    ],
    "logging/setLevel": [
      ["logging/setLevel", { level: "loud" }, ["/params/level"], /expected one of "debug"/],
      ["logging/setLevel", {}, ["/params/level"]],
    ],
    "initialize and ping": [
      [
        "initialize",
        { protocolVersion: 5, capabilities: {}, clientInfo: { name: "x", version: "1" } },
        ["/params/protocolVersion"],
      ],
      [
        "initialize",
        { protocolVersion: "2025-06-18", clientInfo: { name: "x" } },
        ["/params/capabilities", "/params/clientInfo/version"],
      ],
      ["initialize", {}, ["/params/protocolVersion", "/params/capabilities", "/params/clientInfo"]],
      ["ping", { _meta: { progressToken: {} } }, ["/params/_meta/progressToken"]],
    ],
    agents: [
      ["agents/run", { name: 3 }, ["/params/name"]],
      ["agents/run", { name: "nobody" }, ["/params/name"], /unknown agent "nobody"/],
      ["agents/run", { name: "gpa", input: { text: 1 } }, ["/params/input/text"]],
      ["agents/list", { cursor: 5 }, ["/params/cursor"]],
      ["agents/list", { cursor: "forged" }, ["/params/cursor"]],
    ],
  };

  for (const [family, cases] of Object.entries(families)) {
    it(family, async () => {
      const client = await connect();
      for (const [method, params, paths, message] of cases) {
        await expectInvalidParams(send(client, method, params), paths, message);
      }
    });
  }

  it("tools/call arguments the tool's inputSchema refuses: an isError result naming each field (SEP-1303)", async () => {
    const client = await connect();
    const cases: [Record<string, unknown> | undefined, string[]][] = [
      [{ peer: 5 }, ["/params/arguments/peer"]],
      [{ peer: "", times: 1.5 }, ["/params/arguments/peer", "/params/arguments/times"]],
      [undefined, ["/params/arguments/peer"]],
    ];
    for (const [args, paths] of cases) {
      const result = await client.callTool({
        name: "greet",
        ...(args === undefined ? {} : { arguments: args }),
      });
      expect(result.isError).toBe(true);
      const text = (result.content as { type: string; text: string }[])[0]?.text ?? "";
      // The model reads this to correct its call: our words and the fields, not zod's issues as JSON.
      expect(text).toMatch(/^invalid arguments for tool "greet": /);
      for (const path of paths) expect(text).toContain(`${path}: `);
      expect(text).not.toMatch(/\[\s*\{/);
    }
  });

  it("the same requests with valid params are answered (the checks refuse only what is wrong)", async () => {
    const client = await connect();
    const called = await client.callTool({ name: "greet", arguments: { peer: "ann", times: 2 } });
    expect(called.content).toEqual([{ type: "text", text: "hello ann" }]);
    expect((await client.getPrompt({ name: "ask", arguments: { topic: "news" } })).messages).toHaveLength(1);
    expect((await client.readResource({ uri: "mem://items/7" })).contents).toHaveLength(1);
    await client.subscribeResource({ uri: "mem://notes" });
    await client.setLoggingLevel("debug");
    const completion = await client.complete({
      ref: { type: "ref/resource", uri: "mem://items/{id}" },
      argument: { name: "id", value: "" },
    });
    expect(completion.completion.values).toEqual(["1", "2"]);
    expect(await send(client, "ping", {})).toEqual({});
  });

  it("a handler failing on valid params stays -32603; an unknown method stays -32601", async () => {
    const client = await connect();
    const broken = await rejectionOf(client.readResource({ uri: "mem://broken" }));
    expect(broken.code).toBe(-32603);
    expect(broken.message).toContain("the disk is on fire");
    const thrower = await rejectionOf(send(client, "agents/run", { name: "thrower", input: {} }));
    expect(thrower.code).toBe(-32603);
    // Bad params for a method nobody serves: not found is the better answer.
    expect((await rejectionOf(send(client, "tasks/get", { taskId: 5 }))).code).toBe(-32601);
    expect((await rejectionOf(send(client, "nothing/here", { x: 1 }))).code).toBe(-32601);
  });

  it("over the wire: params the SDK's transport would refuse whole are answered -32602 with their id", async () => {
    const host = await serveMcpOverHttp({ createServer: fullServer, enableJsonResponse: true });
    cleanups.push(() => host.close());
    const post = async (body: unknown, session?: string) => {
      const res = await fetch(host.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...(session !== undefined && { "mcp-session-id": session }),
        },
        body: JSON.stringify(body),
      });
      return {
        status: res.status,
        session: res.headers.get("mcp-session-id"),
        json: (await res.json()) as RawAnswer,
      };
    };
    const clientInfo = { name: "raw", version: "1" };
    // An initialize the schema refuses is not one to the SDK's transport ("Server not initialized").
    const refused = await post({
      jsonrpc: "2.0",
      id: 7,
      method: "initialize",
      params: { protocolVersion: 2025, capabilities: {}, clientInfo },
    });
    expect(refused).toMatchObject({
      status: 200,
      session: null,
      json: {
        jsonrpc: "2.0",
        id: 7,
        error: {
          code: -32602,
          message: expect.stringMatching(/^invalid initialize params: \/params\/protocolVersion: /),
          data: { reason: "InvalidParams", problems: [{ path: "/params/protocolVersion" }] },
        },
      },
    });
    expect(host.sessionCount).toBe(0);

    const opened = await post({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo },
    });
    const session = opened.session ?? "";
    expect(session).not.toBe("");
    // Not an object, or a malformed _meta: the transport answered "-32700 Parse error" without the id.
    for (const [id, params, path] of [
      [2, 5, "/params"],
      ["three", ["a"], "/params"],
      [4, { _meta: { progressToken: { no: 1 } } }, "/params/_meta/progressToken"],
    ] as const) {
      const answer = await post({ jsonrpc: "2.0", id, method: "tools/list", params }, session);
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({
        id,
        error: { code: -32602, data: { reason: "InvalidParams", problems: [{ path }] } },
      });
    }
    // What is wrong besides the params stays the transport's to refuse.
    const noVersion = await post({ id: 5, method: "tools/list", params: 5 }, session);
    expect(noVersion.status).toBe(400);
    expect(noVersion.json.error?.code).toBe(-32700);
    const tools = await post({ jsonrpc: "2.0", id: 6, method: "tools/list", params: {} }, session);
    expect(tools.json.result?.tools?.map((tool) => tool.name)).toEqual(["greet"]);
  });

  it("errors reach our agents client with the problems", async () => {
    const host = await serveMcpOverHttp({ createServer: fullServer });
    cleanups.push(() => host.close());
    const agents = await AgentsClient.connect(streamableHttpClientTransport(host.url));
    cleanups.push(() => agents.close());
    const err = await rejectionOf(agents.runAgent("gpa", { text: 42 }));
    expect(err).toBeInstanceOf(AgentsRpcError);
    expect(err.data).toMatchObject({
      reason: "InvalidParams",
      problems: [{ path: "/params/input/text", message: "Invalid input: expected string, received number" }],
    });
  });
});
