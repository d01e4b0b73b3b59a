import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach } from "vitest";
import { z } from "zod";
import {
  AgentRegistry,
  AgentsClient,
  createAgentsMcpServer,
  type JsonValue,
  type McpHttpHost,
  serveMcpOverHttp,
  streamableHttpClientTransport,
} from "../../src/mcp/index.js";

/** Resolves when the next run of an agent sees its AbortSignal fire. */
export class AbortProbe {
  #resolve: (reason: unknown) => void = () => {};
  readonly fired = new Promise<unknown>((resolve) => {
    this.#resolve = resolve;
  });
  watch(signal: AbortSignal): void {
    if (signal.aborted) this.#resolve(signal.reason);
    signal.addEventListener("abort", () => this.#resolve(signal.reason), { once: true });
  }
}

/** Agents for the HTTP tests; `ticker` streams until cancelled and reports its signal to `probe`. */
export function testAgents(probe = new AbortProbe(), pageSize = 50): AgentRegistry {
  return new AgentRegistry({ pageSize })
    .agent(
      "gpa",
      {
        description: "General purpose agent",
        input: z.object({ text: z.string() }),
        output: z.object({ text: z.string() }),
      },
      async ({ text }, { emit }) => {
        // Streams part of the answer; the server completes the rest from the returned output.
        await emit({ text: "Howd" });
        await emit({ text: "y back" });
        return { text: `Howdy back at ya! (${text})` };
      },
    )
    .agent(
      "ticker",
      { input: z.object({}), output: z.object({ ticks: z.number() }) },
      async (_input, { signal, emit }) => {
        probe.watch(signal);
        let ticks = 0;
        while (!signal.aborted) {
          await emit({ ticks: 1 });
          ticks++;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        return { ticks };
      },
    )
    .agent(
      "silent",
      { input: z.object({}), output: z.object({ done: z.boolean() }) },
      async (_input, { signal }) => {
        probe.watch(signal);
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        return { done: true };
      },
    )
    .agent("liar", { input: z.object({}), output: z.object({ n: z.number() }) }, async () => ({
      n: "not a number" as unknown as number,
    }))
    .agent("thrower", { input: z.object({}), output: z.object({}) }, async () => {
      throw new Error("the model is down");
    })
    .agent(
      "mixer",
      { input: z.object({}), output: z.object({ text: z.string() }) },
      async (_input, { emit }) => {
        await emit({ text: "a" });
        await emit({ text: 1 } as unknown as JsonValue); // wrong type: the run must fail
        return { text: "a" };
      },
    )
    .agent(
      "rewriter",
      { input: z.object({}), output: z.object({ text: z.string() }) },
      async (_input, { emit }) => {
        await emit({ text: "Hello" });
        return { text: "Goodbye" }; // not reachable from what was streamed
      },
    );
}

export interface TestHost {
  host: McpHttpHost;
  connect(): Promise<AgentsClient>;
  /** A stock SDK Client with no knowledge of the agents capability. */
  stockClient(): Promise<Client>;
}

/** A real Streamable HTTP server on 127.0.0.1 (one AgentsMcpServer per session), closed after each test. */
export function useAgentsHttpHost(): (agents: AgentRegistry) => Promise<TestHost> {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return async (agents) => {
    const host = await serveMcpOverHttp({
      createServer: () => createAgentsMcpServer({ name: "test-agents", version: "1.0.0", agents }),
    });
    cleanups.push(() => host.close());
    return {
      host,
      async connect() {
        const client = await AgentsClient.connect(streamableHttpClientTransport(host.url));
        cleanups.push(() => client.close());
        return client;
      },
      async stockClient() {
        const client = new Client({ name: "stock", version: "1.0.0" });
        await client.connect(new StreamableHTTPClientTransport(new URL(host.url)));
        cleanups.push(() => client.close());
        return client;
      },
    };
  };
}

/** Rejects with what `promise` rejects with, or fails if it resolves. */
export async function rejectionOf(
  promise: Promise<unknown>,
): Promise<Error & { code?: number; data?: unknown }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: number; data?: unknown };
  }
  throw new Error("expected a rejection, but the promise resolved");
}
