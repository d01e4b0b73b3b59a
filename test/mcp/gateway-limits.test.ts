import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { useMcpGateway } from "../helpers/mcp-gateway.js";

describe("MCP sessions at the gateway are capped per agent", () => {
  const bed = useMcpGateway({ maxSessionsPerAgent: 2 });

  it("refuses a third session of one agent with 429, serves others, and makes room when one closes", async () => {
    const alice = await bed.register("alice");
    const bob = await bed.register("bob");
    const first = await bed.sdkClient("streamable", alice.apiKey);
    await bed.sdkClient("streamable", alice.apiKey);
    // Streamable HTTP shows the JSON-RPC error body; the legacy SSE client only the status.
    await expect(bed.sdkClient("streamable", alice.apiKey)).rejects.toThrow(/-32013/);
    await expect(bed.sdkClient("sse", alice.apiKey)).rejects.toThrow(/429/);
    expect(bed.mcp.stats().sessions).toBe(2);
    await bed.sdkClient("streamable", bob.apiKey);
    await (first.transport as StreamableHTTPClientTransport).terminateSession();
    await expect.poll(() => bed.mcp.stats().sessions).toBe(2);
    await expect(bed.sdkClient("streamable", alice.apiKey)).resolves.toBeDefined();
  });
});
