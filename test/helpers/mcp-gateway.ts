import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, beforeEach } from "vitest";
import { z } from "zod";
import type { AcpAgent } from "../../src/client/index.js";
import { serveMcpAgent } from "../../src/client/mcp-agent.js";
import { AgentsClient, streamableHttpClientTransport } from "../../src/mcp/index.js";
import {
  collabExtension,
  type McpEndpointExtension,
  type McpEndpointOptions,
  mcpEndpointExtension,
} from "../../src/server.js";
import { agentFor } from "../client/fixtures.js";
import { startTestGateway, type TestAgent, type TestGateway } from "./gateway.js";
import { useTmpDir } from "./tmp.js";
import { until } from "./until.js";

export { until };

export type McpTransportKind = "streamable" | "sse";

export interface McpGatewayBed {
  gw: TestGateway;
  mcp: McpEndpointExtension;
  dir: string;
  /** Registers an agent (not connected). */
  register(agentId: string, capabilities?: string[]): Promise<TestAgent>;
  /** Registers an agent and connects its AcpAgent (closed after the test). */
  member(
    agentId: string,
    capabilities?: string[],
  ): Promise<{ test: TestAgent; agent: AcpAgent; errors: Error[] }>;
  /** Our agents client over one transport, authenticated with `apiKey` (closed after the test). */
  client(kind: McpTransportKind, apiKey: string): Promise<AgentsClient>;
  /** A stock SDK Client (capabilities as given), closed after the test. */
  sdkClient(kind: McpTransportKind, apiKey: string, capabilities?: Record<string, unknown>): Promise<Client>;
  transport(kind: McpTransportKind, apiKey: string): StreamableHTTPClientTransport | SSEClientTransport;
  cleanup(fn: () => Promise<unknown>): void;
}

/** Per test: a real gateway with the MCP extension configured by `options` (short timers for tests). */
export function useMcpGateway(options: Omit<McpEndpointOptions, "tasks"> = {}): McpGatewayBed {
  const tmp = useTmpDir("acp-mcp-gw-");
  const cleanups: (() => Promise<unknown>)[] = [];
  const bed = {} as McpGatewayBed;
  beforeEach(async () => {
    bed.dir = tmp();
    const collab = collabExtension({ auditRoot: join(bed.dir, "data", "collab-audit") });
    bed.mcp = mcpEndpointExtension({
      tasks: collab.handoffs,
      auditRoot: join(bed.dir, "mcp-audit"),
      ...options,
    });
    bed.gw = await startTestGateway({ dataDir: join(bed.dir, "data"), extensions: [collab, bed.mcp] });
    cleanups.push(() => bed.gw.close());
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
  bed.cleanup = (fn) => cleanups.push(fn);
  bed.register = (agentId, capabilities = []) =>
    bed.gw.register(agentId, `principal-${agentId}`, { capabilities });
  bed.member = async (agentId, capabilities = []) => {
    const test = await bed.register(agentId, capabilities);
    const agent = agentFor(bed.gw, test, join(bed.dir, agentId));
    const errors: Error[] = [];
    agent.on("error", (err) => errors.push(err));
    await agent.connect();
    cleanups.push(() => agent.close());
    return { test, agent, errors };
  };
  bed.transport = (kind, apiKey) =>
    kind === "streamable"
      ? streamableHttpClientTransport(`${bed.gw.url}/mcp`, { apiKey })
      : new SSEClientTransport(new URL(`${bed.gw.url}/mcp/sse`), {
          requestInit: { headers: { "x-api-key": apiKey } },
        });
  bed.client = async (kind, apiKey) => {
    const client = await AgentsClient.connect(bed.transport(kind, apiKey));
    cleanups.push(() => client.close());
    return client;
  };
  bed.sdkClient = async (kind, apiKey, capabilities = {}) => {
    const client = new Client({ name: "sdk-test", version: "1.0.0" }, { capabilities });
    await client.connect(bed.transport(kind, apiKey));
    cleanups.push(() => client.close());
    return client;
  };
  return bed;
}

/** Reads an SSE response body until `predicate` holds on the text so far (then stops reading). */
export async function readSseUntil(
  response: Response,
  predicate: (text: string) => boolean,
  timeoutMs = 10_000,
): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  const timer = setTimeout(() => void reader.cancel(), timeoutMs);
  try {
    while (!predicate(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => undefined);
  }
  return text;
}

/** A connected agent `writer` serving the MCP agent `writer/shout`: upper-cases words, one delta per word. */
export async function shoutingWriter(bed: McpGatewayBed): Promise<AcpAgent> {
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
  return agent;
}
