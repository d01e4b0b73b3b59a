import { ProgressNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AgentsRpcError,
  combineDelta,
  DeltaMismatchError,
  JsonRpcErrorCodes,
  type JsonValue,
} from "../../src/mcp/index.js";
import { AbortProbe, rejectionOf, testAgents, useAgentsHttpHost } from "./helpers.js";

const startHost = useAgentsHttpHost();

/** POSTs a raw initialize and returns the JSON-RPC result as it is on the wire (SSE or JSON body). */
async function rawInitialize(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    }),
  });
  expect(response.status).toBe(200);
  const body = await response.text();
  const json = body.startsWith("{")
    ? body
    : (body.split("\n").find((line) => line.startsWith("data: ")) ?? "").slice(6);
  return (JSON.parse(json) as { result: Record<string, unknown> }).result;
}

describe("the agents capability over Streamable HTTP", () => {
  it("is declared at the top level on the wire, and mirrored under experimental", async () => {
    const { host } = await startHost(testAgents());
    const result = await rawInitialize(host.url);
    expect(result.capabilities).toMatchObject({ agents: {}, experimental: { agents: {} } });
  });

  it("our client reads the top level from the raw result; the stock SDK client only sees the mirror", async () => {
    const test = await startHost(testAgents());
    const client = await test.connect();
    expect(client.agentsCapability).toBe("top-level");
    expect(client.hasAgentsCapability).toBe(true);
    expect(client.serverCapabilities.agents).toEqual({});
    const stock = await test.stockClient();
    const seen = stock.getServerCapabilities() as Record<string, unknown>;
    expect(seen.agents).toBeUndefined(); // stripped by the SDK's schema
    expect(seen.experimental).toEqual({ agents: {} });
  });

  it("agents/list pages with cursors; listAgents follows them; a forged cursor is -32602", async () => {
    const client = await (await startHost(testAgents(new AbortProbe(), 3))).connect();
    const first = await client.listAgentsPage();
    expect(first.agents.map((a) => a.name)).toEqual(["gpa", "ticker", "silent"]);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await client.listAgentsPage(first.nextCursor);
    expect(second.agents.map((a) => a.name)).toEqual(["liar", "thrower", "mixer"]);
    const all = await client.listAgents();
    expect(all.map((a) => a.name)).toEqual([
      "gpa",
      "ticker",
      "silent",
      "liar",
      "thrower",
      "mixer",
      "rewriter",
    ]);
    expect(all[0]).toEqual({
      name: "gpa",
      description: "General purpose agent",
      inputSchema: expect.objectContaining({
        type: "object",
        properties: { text: { type: "string" } },
        required: ["text"],
      }),
      outputSchema: expect.objectContaining({ type: "object", required: ["text"] }),
    });
    const forged = await rejectionOf(client.listAgentsPage("bm90LWEtY3Vyc29y"));
    expect(forged).toBeInstanceOf(AgentsRpcError);
    expect(forged.code).toBe(JsonRpcErrorCodes.InvalidParams);
    expect(forged.message).toBe('invalid agents/list cursor "bm90LWEtY3Vyc29y"');
  });

  it("agents/run without a progressToken returns {output} and sends no deltas", async () => {
    const client = await (await startHost(testAgents())).connect();
    expect(await client.runAgent("gpa", { text: "Howdy!" })).toEqual({ text: "Howdy back at ya! (Howdy!)" });
  });

  it("agents/run with a progressToken streams deltas that combine to exactly the output", async () => {
    const client = await (await startHost(testAgents())).connect();
    const deltas: JsonValue[] = [];
    const output = await client.runAgent(
      "gpa",
      { text: "Howdy!" },
      { onDelta: (delta) => deltas.push(delta) },
    );
    expect(deltas).toEqual([{ text: "Howd" }, { text: "y back" }, { text: " at ya! (Howdy!)" }]);
    expect(deltas.reduce<JsonValue | undefined>((acc, d) => combineDelta(acc, d), undefined)).toEqual(output);
  });

  it("a stock SDK client with its own progressToken gets the agents capability's deltas and standard progress", async () => {
    const stock = await (await startHost(testAgents())).stockClient();
    const deltas: JsonValue[] = [];
    const progress: unknown[] = [];
    stock.fallbackNotificationHandler = async (notification) => {
      if (notification.method === "notifications/agents/run/progress")
        deltas.push(notification.params?.delta as JsonValue);
    };
    // Replaces the SDK's own progress routing, which drops a notification that arrives in the same
    // read as the response (it removes the handler synchronously, but dispatches notifications later).
    stock.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      progress.push(notification.params);
    });
    const result = await stock.request(
      {
        method: "agents/run",
        params: { name: "gpa", input: { text: "hi" }, _meta: { progressToken: "tok-1" } },
      } as never,
      z.object({ output: z.json() }),
    );
    expect(result.output).toEqual({ text: "Howdy back at ya! (hi)" });
    expect(deltas.reduce<JsonValue | undefined>((acc, d) => combineDelta(acc, d), undefined)).toEqual(
      result.output,
    );
    expect(progress).toEqual([1, 2, 3].map((n) => ({ progressToken: "tok-1", progress: n })));
  });

  it("invalid input is -32602 with the schema errors in data", async () => {
    const client = await (await startHost(testAgents())).connect();
    const error = await rejectionOf(client.runAgent("gpa", { text: 42 }));
    expect(error).toBeInstanceOf(AgentsRpcError);
    expect(error.code).toBe(-32602);
    expect(error.message).toBe(
      'invalid input for agent "gpa": text: Invalid input: expected string, received number',
    );
    expect(error.data).toEqual({
      agent: "gpa",
      issues: [
        { path: ["text"], code: "invalid_type", message: "Invalid input: expected string, received number" },
      ],
      reason: "InvalidParams",
      problems: [{ path: "/params/input/text", message: "Invalid input: expected string, received number" }],
    });
  });

  it("an unknown agent is -32602 naming it; missing params are -32602 too", async () => {
    const client = await (await startHost(testAgents())).connect();
    const unknown = await rejectionOf(client.runAgent("nobody", {}));
    expect(unknown.code).toBe(-32602);
    expect(unknown.message).toBe('unknown agent "nobody"');
    expect(unknown.data).toEqual({
      agent: "nobody",
      reason: "InvalidParams",
      problems: [{ path: "/params/name", message: 'no agent named "nobody"' }],
    });
    const noName = await rejectionOf(client.runAgent("", {}));
    expect(noName.code).toBe(-32602);
    expect(noName.message).toContain("the agent name must be a non-empty string");
    expect(noName.data).toMatchObject({
      problems: [{ path: "/params/name", message: "the agent name must be a non-empty string" }],
    });
  });

  it("an output that breaks the outputSchema, or a throwing agent, is -32603 naming the agent", async () => {
    const client = await (await startHost(testAgents())).connect();
    const liar = await rejectionOf(client.runAgent("liar", {}));
    expect(liar.code).toBe(-32603);
    expect(liar.message).toBe(
      'agent "liar" returned an invalid output: n: Invalid input: expected number, received string',
    );
    const thrower = await rejectionOf(client.runAgent("thrower", {}));
    expect(thrower.code).toBe(-32603);
    expect(thrower.message).toBe('agent "thrower" failed: the model is down');
  });

  it("an agent emitting a delta of the wrong type, or one its output cannot follow, fails the run", async () => {
    const client = await (await startHost(testAgents())).connect();
    const mixer = await rejectionOf(client.runAgent("mixer", {}, { onDelta: () => {} }));
    expect(mixer.code).toBe(-32603);
    expect(mixer.message).toBe('agent "mixer" failed: cannot combine string with number at $.text');
    const rewriter = await rejectionOf(client.runAgent("rewriter", {}, { onDelta: () => {} }));
    expect(rewriter.code).toBe(-32603);
    expect(rewriter.message).toContain("streamed deltas do not lead to the output at $.text");
  });

  it("cancelling mid-stream sends notifications/cancelled and the agent's signal fires", async () => {
    const probe = new AbortProbe();
    const client = await (await startHost(testAgents(probe))).connect();
    const cancel = new AbortController();
    let deltas = 0;
    const error = await rejectionOf(
      client.runAgent(
        "ticker",
        {},
        {
          signal: cancel.signal,
          onDelta: () => {
            if (++deltas === 3) cancel.abort(new Error("enough"));
          },
        },
      ),
    );
    expect(error.message).toBe("enough");
    expect(await probe.fired).toEqual(expect.stringContaining("enough"));
  });

  it("a run that stays silent past timeoutMs rejects with -32001 and is cancelled on the server", async () => {
    const probe = new AbortProbe();
    const client = await (await startHost(testAgents(probe))).connect();
    const error = await rejectionOf(client.runAgent("silent", {}, { timeoutMs: 200, onDelta: () => {} }));
    expect(error.code).toBe(JsonRpcErrorCodes.RequestTimeout);
    expect(error.message).toBe('agents/run "silent" timed out: no progress for 200 ms');
    await probe.fired;
  });

  it("an onDelta that throws ends the run with its error", async () => {
    const client = await (await startHost(testAgents())).connect();
    const error = await rejectionOf(
      client.runAgent(
        "gpa",
        { text: "x" },
        {
          onDelta: () => {
            throw new Error("display broke");
          },
        },
      ),
    );
    expect(error.message).toBe("display broke");
  });

  it("each session gets its own server; closing the host frees them", async () => {
    const test = await startHost(testAgents());
    await test.connect();
    await test.connect();
    expect(test.host.sessionCount).toBe(2);
    await test.host.close();
    expect(test.host.sessionCount).toBe(0);
  });

  it("the client rejects deltas that do not combine to the final output", async () => {
    const { McpServer } = await import("@modelcontextprotocol/sdk/server/mcp.js");
    const { serveMcpOverHttp, AgentsClient, streamableHttpClientTransport } = await import(
      "../../src/mcp/index.js"
    );
    // A server that lies: it streams "Hello" but answers "Goodbye" (built on the bare SDK on purpose).
    const host = await serveMcpOverHttp({
      createServer: () => {
        const lying = new McpServer(
          { name: "liar", version: "1" },
          { capabilities: { experimental: { agents: {} } } },
        );
        lying.server.setRequestHandler(
          z.object({ method: z.literal("agents/run"), params: z.unknown() }),
          async (_request, extra) => {
            const progressToken = extra._meta?.progressToken ?? 0;
            await extra.sendNotification({
              method: "notifications/agents/run/progress",
              params: { progressToken, delta: { text: "Hello" } },
            } as never);
            return { output: { text: "Goodbye" } };
          },
        );
        return lying;
      },
    });
    try {
      const client = await AgentsClient.connect(streamableHttpClientTransport(host.url));
      expect(client.agentsCapability).toBe("experimental");
      const error = await rejectionOf(client.runAgent("any", {}, { onDelta: () => {} }));
      expect(error).toBeInstanceOf(DeltaMismatchError);
      expect(error.message).toBe(
        'streamed deltas do not lead to the output at $.text: the 1 deltas combine to {"text":"Hello"} but the final output is {"text":"Goodbye"}',
      );
      await client.close();
    } finally {
      await host.close();
    }
  });
});
