import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { AcpAgent } from "../../src/client/index.js";
import { serveMcpAgent } from "../../src/client/mcp-agent.js";
import { combineDeltas, type JsonValue } from "../../src/mcp/index.js";
import { api } from "../helpers/gateway.js";
import { type McpGatewayBed, type McpTransportKind, until, useMcpGateway } from "../helpers/mcp-gateway.js";
import { AbortProbe, rejectionOf } from "./helpers.js";

/** A writer agent serving `summarize` (streams word by word) and `ticker` (streams until cancelled). */
async function writer(bed: McpGatewayBed, probe = new AbortProbe()): Promise<AcpAgent> {
  const { test, agent } = await bed.member("writer");
  await serveMcpAgent(
    agent,
    "summarize",
    {
      description: "Summarizes a text",
      input: z.object({ text: z.string(), words: z.int().positive().default(3) }),
      output: z.object({ summary: z.string(), words: z.int() }),
    },
    async ({ text, words }, { emit }) => {
      const picked = text.split(/\s+/).slice(0, words);
      for (const [i, word] of picked.entries()) await emit({ summary: i === 0 ? word : ` ${word}` });
      return { summary: picked.join(" "), words: picked.length };
    },
    { apiKey: test.apiKey },
  );
  await serveMcpAgent(
    agent,
    "ticker",
    { input: z.object({}), output: z.object({ ticks: z.number() }) },
    async (_input, { signal, emit }) => {
      probe.watch(signal);
      let ticks = 0;
      while (!signal.aborted) {
        await emit({ ticks: 1 });
        ticks++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return { ticks };
    },
    { apiKey: test.apiKey },
  );
  // A plain ACP request handler: runnable as the MCP agent "writer".
  agent.onRequest("agent.request", (body) => ({ echoed: body, by: "writer" }));
  return agent;
}

describe("agents/run through the gateway's MCP endpoint", () => {
  const bed = useMcpGateway({ runTimeoutMs: 15_000 });

  it("lists what agents publish with serveMcpAgent, with their JSON Schemas", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    const agents = await client.listAgents();
    expect(agents.map((a) => a.name)).toEqual(["caller", "writer", "writer/summarize", "writer/ticker"]);
    expect(agents[2]).toMatchObject({
      description: "Summarizes a text",
      inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      outputSchema: { type: "object", required: ["summary", "words"] },
    });
  });

  it("publishes and withdraws descriptors with the agent's key, refusing bad names and bodies", async () => {
    const { test, agent } = await bed.member("writer");
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    const served = await serveMcpAgent(
      agent,
      "echo",
      { input: z.object({ text: z.string() }), output: z.object({ text: z.string() }) },
      ({ text }) => ({ text }),
      { apiKey: test.apiKey },
    );
    expect((await client.listAgents()).map((a) => a.name)).toContain("writer/echo");
    await expect(
      serveMcpAgent(agent, "echo", { input: z.object({}), output: z.object({}) }, () => ({}), {
        apiKey: test.apiKey,
      }),
    ).rejects.toThrow('MCP agent "echo" is already served by this agent');
    await expect(
      serveMcpAgent(agent, "bad..name", { input: z.object({}), output: z.object({}) }, () => ({}), {
        apiKey: test.apiKey,
      }),
    ).rejects.toThrow(/MCP agent name "bad..name" must be letters/);
    await expect(
      serveMcpAgent(agent, "other", { input: z.object({}), output: z.object({}) }, () => ({}), {
        apiKey: "acp_wrong",
      }),
    ).rejects.toThrow(/answered 401: unknown or revoked API key/);

    const descriptor = { inputSchema: { type: "object" }, outputSchema: { type: "object" } };
    const anonymous = await api(bed.gw.url, "/api/v1/mcp/agents/x", { method: "PUT", body: descriptor });
    expect(anonymous.status).toBe(401);
    const noSchema = await api(bed.gw.url, "/api/v1/mcp/agents/x", {
      method: "PUT",
      apiKey: test.apiKey,
      body: { inputSchema: { type: "object" } },
    });
    expect(noSchema.status).toBe(400);
    expect(noSchema.json.error).toMatchObject({
      message:
        "invalid MCP agent descriptor: outputSchema: Invalid input: expected record, received undefined",
      data: { problems: [{ path: "/outputSchema" }] },
    });
    const badName = await api(bed.gw.url, "/api/v1/mcp/agents/.hidden", {
      method: "PUT",
      apiKey: test.apiKey,
      body: descriptor,
    });
    expect(badName.status).toBe(400);
    expect(badName.json.error).toMatchObject({ data: { problems: [{ path: "/name" }] } });

    await served.withdraw();
    expect((await client.listAgents()).map((a) => a.name)).not.toContain("writer/echo");
  });

  it.each(["streamable", "sse"] as const)(
    "%s: streams the target's deltas as progress, and they combine to exactly the output",
    async (kind: McpTransportKind) => {
      await writer(bed);
      const caller = await bed.register("caller");
      const client = await bed.client(kind, caller.apiKey);
      const deltas: JsonValue[] = [];
      const output = await client.runAgent(
        "writer/summarize",
        { text: "the quick brown fox jumps", words: 4 },
        { onDelta: (delta) => deltas.push(delta) },
      );
      expect(output).toEqual({ summary: "the quick brown fox", words: 4 });
      expect(deltas.length).toBeGreaterThanOrEqual(4);
      expect(deltas.slice(0, 4)).toEqual([
        { summary: "the" },
        { summary: " quick" },
        { summary: " brown" },
        { summary: " fox" },
      ]);
      expect(combineDeltas(deltas)).toEqual(output);
    },
  );

  it("runs without a progress token: just the output", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    expect(await client.runAgent("writer/summarize", { text: "one two three four" })).toEqual({
      summary: "one two three",
      words: 3,
    });
  });

  it("runs a plain agent as an ACP request: input is the body, output the response body", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = await bed.client("sse", caller.apiKey);
    expect(await client.runAgent("writer", { question: "hi" })).toEqual({
      echoed: { question: "hi" },
      by: "writer",
    });
    const notObject = await rejectionOf(client.runAgent("writer", "hi"));
    expect(notObject).toMatchObject({
      code: -32602,
      message: 'invalid input for agent "writer": an ACP request body must be a JSON object',
    });
  });

  it("answers invalid input with -32602 and the target's schema issues", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    const err = await rejectionOf(client.runAgent("writer/summarize", { text: 42 }));
    expect(err.code).toBe(-32602);
    expect(err.message).toBe(
      'invalid input for agent "writer/summarize": text: Invalid input: expected string, received number',
    );
    expect(err.data).toMatchObject({
      agent: "writer/summarize",
      issues: [{ path: ["text"], code: "invalid_type" }],
    });
  });

  it("answers an unknown agent with -32602 naming it, without bothering any agent", async () => {
    await writer(bed);
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    for (const name of ["nobody", "writer/nothing", "caller/summarize", "mcp-bridge-x"]) {
      const err = await rejectionOf(client.runAgent(name, {}));
      expect(err).toMatchObject({ code: -32602, message: `unknown agent "${name}"` });
    }
    expect(bed.mcp.stats().runs).toBe(0);
  });

  it("fails fast when the target is offline", async () => {
    const caller = await bed.register("caller");
    await bed.register("sleeper");
    const client = await bed.client("streamable", caller.apiKey);
    const err = await rejectionOf(client.runAgent("sleeper", {}));
    expect(err).toMatchObject({
      code: -32603,
      message:
        'agent "sleeper" failed: sleeper is offline (not connected to the gateway), so it cannot run now',
    });
  });

  it.each(["streamable", "sse"] as const)(
    "%s: cancelling mid-stream aborts the run at the target agent",
    async (kind) => {
      const probe = new AbortProbe();
      await writer(bed, probe);
      const caller = await bed.register("caller");
      const client = await bed.client(kind, caller.apiKey);
      const cancel = new AbortController();
      let seen = 0;
      const run = client.runAgent(
        "writer/ticker",
        {},
        {
          signal: cancel.signal,
          onDelta: () => {
            if (++seen === 3) cancel.abort(new Error("enough"));
          },
        },
      );
      expect(await rejectionOf(run)).toMatchObject({ message: "enough" });
      expect(await probe.fired).toMatchObject({ message: "the requester cancelled the run" });
      await until(
        () => bed.mcp.stats().runs,
        (runs) => runs === 0,
        "the bridge forgets the run",
      );
    },
  );

  it("closing the session mid-run aborts the run at the target and frees it", async () => {
    const probe = new AbortProbe();
    await writer(bed, probe);
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    const stop = new AbortController();
    let streaming: () => void = () => {};
    const firstDelta = new Promise<void>((resolve) => {
      streaming = resolve;
    });
    const run = client
      .runAgent("writer/ticker", {}, { signal: stop.signal, onDelta: () => streaming() })
      .catch((err: unknown) => err);
    await firstDelta;
    expect(bed.mcp.stats()).toMatchObject({ sessions: 1, runs: 1 });
    await (client.mcp.transport as StreamableHTTPClientTransport).terminateSession();
    expect(await probe.fired).toMatchObject({ message: "the requester cancelled the run" });
    await until(
      () => bed.mcp.stats(),
      (s) => s.sessions === 0 && s.runs === 0,
      "the session and its run are freed",
    );
    stop.abort(new Error("test over"));
    await run;
  });

  it("carries the run as a request signed by the gateway's bridge agent, naming the MCP caller", async () => {
    const { test, agent } = await bed.member("auditor");
    const seen: { from: string; principal: string; onBehalfOf: unknown }[] = [];
    await serveMcpAgent(
      agent,
      "whoami",
      { input: z.object({}), output: z.object({ ok: z.boolean() }) },
      () => ({ ok: true }),
      { apiKey: test.apiKey },
    );
    agent.on("message", (message) => {
      if (message.method === "agent.mcp.run") {
        seen.push({
          from: message.from,
          principal: message.principalId,
          onBehalfOf: message.body?.onBehalfOf,
        });
      }
    });
    const caller = await bed.register("caller");
    const client = await bed.client("streamable", caller.apiKey);
    expect(await client.runAgent("auditor/whoami", {})).toEqual({ ok: true });
    expect(seen).toEqual([
      {
        from: expect.stringMatching(/^mcp-bridge-[0-9a-f]{12}$/),
        principal: "acp-gateway-mcp",
        onBehalfOf: { agentId: "caller", principalId: "principal-caller" },
      },
    ]);
    // The bridge agent itself is not offered to MCP clients.
    expect((await client.listAgents()).map((a) => a.name)).toEqual(["auditor", "auditor/whoami", "caller"]);
  });
});
