import { describe, expect, it } from "vitest";
import { z } from "zod";
import { summarize } from "../../src/mcp/demo.js";
import {
  AgentInputError,
  AgentOutputError,
  AgentRegistry,
  type AgentRunContext,
  createAgentsMcpServer,
  InvalidCursorError,
  UnknownAgentError,
} from "../../src/mcp/index.js";
import { rejectionOf } from "./helpers.js";

const context: AgentRunContext = { signal: new AbortController().signal, emit: async () => {} };
const text = z.object({ text: z.string() });

describe("AgentRegistry", () => {
  it("describes agents with JSON Schemas generated from zod (input side for inputs, defaults optional)", async () => {
    const registry = new AgentRegistry().agent(
      "greeter",
      {
        description: "Greets",
        input: z.object({ name: z.string(), times: z.number().default(1) }),
        output: text,
      },
      ({ name, times }) => ({ text: `hello ${name}`.repeat(times) }),
    );
    const descriptor = await registry.get("greeter");
    expect(descriptor?.inputSchema).toMatchObject({
      type: "object",
      properties: { name: { type: "string" }, times: { type: "number", default: 1 } },
      required: ["name"],
    });
    expect(await registry.run("greeter", { name: "Ada" }, context)).toEqual({ text: "hello Ada" });
    expect(await registry.get("nobody")).toBeUndefined();
  });

  it("pages in registration order with opaque cursors and rejects cursors it did not issue", async () => {
    const registry = new AgentRegistry({ pageSize: 2 });
    for (const name of ["a", "b", "c", "d", "e"])
      registry.agent(name, { input: text, output: text }, (i) => i);
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await registry.list(cursor);
      pages.push(page.agents.map((a) => a.name));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    expect(pages).toEqual([["a", "b"], ["c", "d"], ["e"]]);
    await expect(registry.list("garbage")).rejects.toThrow(InvalidCursorError);
    const beyond = Buffer.from(JSON.stringify({ offset: 99 })).toString("base64url");
    await expect(registry.list(beyond)).rejects.toThrow(`invalid agents/list cursor "${beyond}"`);
  });

  it("rejects bad names, duplicates, unrepresentable schemas and bad page sizes at registration", () => {
    const registry = new AgentRegistry().agent("ok", { input: text, output: text }, (i) => i);
    expect(() => registry.agent("ok", { input: text, output: text }, (i) => i)).toThrow(
      'agent "ok" is already registered',
    );
    expect(() => registry.agent("has space", { input: text, output: text }, (i) => i)).toThrow(
      'agent name "has space" must match',
    );
    expect(() =>
      registry.agent("dated", { input: z.object({ at: z.date() }), output: text }, () => ({ text: "" })),
    ).toThrow('agent "dated": its input schema cannot be expressed as JSON Schema');
    expect(() => new AgentRegistry({ pageSize: 0 })).toThrow("pageSize must be a positive integer, got 0");
  });

  it("validates input and output, with typed errors", async () => {
    const registry = new AgentRegistry()
      .agent("strict", { input: text, output: text }, (i) => i)
      .agent("sloppy", { input: text, output: text }, () => ({ text: 5 }) as unknown as { text: string });
    const input = await rejectionOf(registry.run("strict", { text: ["x"] }, context));
    expect(input).toBeInstanceOf(AgentInputError);
    expect(input.code).toBe(-32602);
    const output = await rejectionOf(registry.run("sloppy", { text: "x" }, context));
    expect(output).toBeInstanceOf(AgentOutputError);
    expect(output.code).toBe(-32603);
    expect(await rejectionOf(registry.run("ghost", {}, context))).toBeInstanceOf(UnknownAgentError);
  });

  it("server.agent() registers into the server's own registry, and refuses for a custom source", async () => {
    const server = createAgentsMcpServer({ name: "s", version: "1" });
    server.agent("echo", { input: text, output: text }, (i) => i);
    expect((await server.agents.list(undefined)).agents.map((a) => a.name)).toEqual(["echo"]);
    const custom = createAgentsMcpServer({
      name: "s",
      version: "1",
      agents: { list: async () => ({ agents: [] }), get: async () => undefined, run: async () => null },
    });
    expect(() => custom.agent("echo", { input: text, output: text }, (i) => i)).toThrow(
      "this server's agents come from a custom AgentSource",
    );
  });
});

describe("the summarize-text demo", () => {
  it("keeps the sentences with the most frequent words, in their original order", () => {
    const text = "Cats sleep. Dogs bark at cats. Cats and dogs play. Fish swim.";
    expect(summarize(text, 2)).toEqual(["Cats sleep.", "Dogs bark at cats."]);
    expect(summarize(text, 10)).toHaveLength(4);
  });
});
