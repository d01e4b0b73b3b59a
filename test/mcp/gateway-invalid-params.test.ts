/**
 * The gateway's MCP endpoint (Streamable HTTP and legacy SSE) answers bad params -32602 with
 * `data.problems` naming the field, for every method family it serves; methods it does not serve
 * stay -32601 whatever their params.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type McpTransportKind, useMcpGateway } from "../helpers/mcp-gateway.js";
import { rejectionOf } from "./helpers.js";

const NO_TASK = "00000000-0000-4000-8000-000000000000";
const CLIENT_INFO = { name: "params-test", version: "1" };

type Case = [method: string, params: unknown, path: string, message?: RegExp];

const CASES: Case[] = [
  [
    "initialize",
    { protocolVersion: 1, capabilities: {}, clientInfo: CLIENT_INFO },
    "/params/protocolVersion",
  ],
  ["tools/call", { name: ["accept_task"] }, "/params/name"],
  ["tools/call", { name: "hire_someone", arguments: {} }, "/params/name", /unknown tool "hire_someone"/],
  ["tools/list", { cursor: 1 }, "/params/cursor"],
  ["resources/read", { uri: "tasks pending" }, "/params/uri", /not an absolute URI/],
  ["resources/read", { uri: 42 }, "/params/uri"],
  ["resources/read", { uri: "nope://x" }, "/params/uri", /Resource nope:\/\/x not found/],
  ["resources/read", { uri: `tasks://${NO_TASK}` }, "/params/uri", /no task .* involving/],
  ["resources/subscribe", {}, "/params/uri"],
  ["resources/subscribe", { uri: "nope://x" }, "/params/uri", /not a resource this server can notify about/],
  ["resources/unsubscribe", { uri: "%%" }, "/params/uri"],
  ["resources/templates/list", { cursor: [] }, "/params/cursor"],
  ["prompts/get", { name: null }, "/params/name"],
  ["prompts/get", { name: "user-prompt" }, "/params/name", /unknown prompt "user-prompt"/],
  ["prompts/get", { name: "system-prompt", arguments: { verbose: true } }, "/params/arguments/verbose"],
  ["agents/run", { name: "" }, "/params/name"],
  ["agents/run", { name: "no-such-agent", input: {} }, "/params/name", /unknown agent "no-such-agent"/],
  ["agents/list", { cursor: "x" }, "/params/cursor"],
  ["ping", { _meta: { progressToken: true } }, "/params/_meta/progressToken"],
];

/** Arguments a tool's inputSchema refuses: an isError result naming the field (SEP-1303), not -32602. */
const TOOL_ARGUMENT_CASES: [tool: string, args: Record<string, unknown>, path: string][] = [
  ["accept_task", { taskId: 7 }, "/params/arguments/taskId"],
  ["accept_task", {}, "/params/arguments/taskId"],
  ["decline_task", { taskId: NO_TASK, reason: "" }, "/params/arguments/reason"],
  ["add_task_message", { taskId: NO_TASK, text: "x", progress: 101 }, "/params/arguments/progress"],
  ["ask_agent", { name: "" }, "/params/arguments/name"],
  ["list_agents", { cursor: 3 }, "/params/arguments/cursor"],
];

describe("bad params at the gateway's MCP endpoint", () => {
  const bed = useMcpGateway();

  for (const kind of ["streamable", "sse"] as McpTransportKind[]) {
    it(`are -32602 naming the field, over ${kind}`, async () => {
      const caller = await bed.register(`params-${kind}`);
      const client = await bed.sdkClient(kind, caller.apiKey);
      for (const [method, params, path, message] of CASES) {
        const err = await rejectionOf(send(client, method, params));
        expect({ method, params, code: err.code }).toEqual({ method, params, code: -32602 });
        expect(err.data).toMatchObject({ reason: "InvalidParams", problems: [{ path }] });
        if (message !== undefined) expect(err.message).toMatch(message);
      }
      for (const [name, args, path] of TOOL_ARGUMENT_CASES) {
        const result = (await client.callTool({ name, arguments: args })) as {
          isError?: boolean;
          content: { text: string }[];
        };
        expect({ name, args, isError: result.isError }).toEqual({ name, args, isError: true });
        expect(result.content[0]?.text).toContain(`${path}: `);
      }
      // The session is intact: a valid request still works.
      expect((await client.listTools()).tools.length).toBe(7);
    });

    it(`methods the gateway does not serve stay -32601 whatever their params, over ${kind}`, async () => {
      const caller = await bed.register(`unserved-${kind}`);
      const client = await bed.sdkClient(kind, caller.apiKey);
      for (const [method, params] of [
        ["logging/setLevel", { level: "loud" }],
        ["completion/complete", { ref: 5 }],
        ["tasks/get", {}],
      ] as const) {
        expect((await rejectionOf(send(client, method, params))).code).toBe(-32601);
      }
    });
  }

  it("answers a malformed initialize that opens no session -32602 with its id (Streamable HTTP)", async () => {
    const caller = await bed.register("raw-initialize");
    const res = await fetch(`${bed.gw.url}/mcp`, {
      method: "POST",
      headers: {
        "x-api-key": caller.apiKey,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: "init-1",
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: [], clientInfo: { name: "raw" } },
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    const body = (await res.json()) as {
      id: unknown;
      error: { code: number; data: { problems: unknown[] } };
    };
    expect(body.id).toBe("init-1");
    expect(body.error.code).toBe(-32602);
    expect(body.error.data.problems).toEqual([
      { path: "/params/capabilities", message: expect.any(String) },
      { path: "/params/clientInfo/version", message: expect.any(String) },
    ]);
    expect(bed.mcp.stats().sessions).toBe(0);
  });

  it("answers params that are not an object -32602 on the legacy stream, and keeps the session", async () => {
    const caller = await bed.register("raw-sse");
    const client = await bed.sdkClient("sse", caller.apiKey);
    for (const params of [5, "x", ["decline_task"]]) {
      const err = await rejectionOf(send(client, "tools/call", params));
      expect(err.code).toBe(-32602);
      expect(err.data).toMatchObject({ reason: "InvalidParams", problems: [{ path: "/params" }] });
    }
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(["system-prompt"]);
  });
});

/** Sends `method` with `params` as they are (the SDK client does not check what it sends). */
function send(client: Client, method: string, params: unknown) {
  return client.request({ method, params } as never, z.unknown());
}
