import { type Task, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { beforeAll, expect, it } from "vitest";
import type { InboundContext } from "../../src/client/index.js";
import { streamableHttpClientTransport } from "../../src/mcp/index.js";
import { sendRequest } from "../extensions/a2a/inbound-bed.js";
import { type FederatedGateway, useFederatedPair } from "../helpers/federation.js";

/**
 * Callers that speak A2A or MCP, not ACP, connected to a.test, reaching an agent of b.test: the
 * gateway's bridge agent signs the request as an agent of a.test and it crosses the federation link
 * like any other message. Written once for both brokers: each gateway on the embedded store, or each
 * on a NATS of its own.
 */
export function bridgesAcrossTheLink(broker: "embedded" | "nats"): void {
  let a: FederatedGateway;
  let b: FederatedGateway;
  let callerKey: string;
  const seen: { body: Record<string, unknown>; context: InboundContext }[] = [];

  const started = useFederatedPair(broker);

  beforeAll(async () => {
    ({ a, b } = started());
    callerKey = (await a.register("caller", "principal-caller")).apiKey;
    const { agent: beta } = await b.agent("beta");
    beta.onRequest((body, context) => {
      seen.push({ body, context });
      return { text: `beta read: ${String(body.text ?? body.question)}` };
    });
  });

  it("an unmodified A2A client at a.test sends to beta@b.test and gets beta's answer", async () => {
    const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
      headers: async () => ({ authorization: `Bearer ${callerKey}` }),
      shouldRetryWithHeaders: async () => undefined,
    });
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
      }),
    );
    const client = await factory.createFromUrl(`${a.url}/a2a/beta@b.test/`);
    const card = await client.getAgentCard();
    expect(card.name).toBe("beta@b.test");
    expect(card.supportedInterfaces[0]?.url).toBe(`${a.url}/a2a/beta%40b.test`);

    const task = (await client.sendMessage(sendRequest("the quarterly figures"))) as Task;
    expect(task.status?.state, JSON.stringify(task.status)).toBe(TaskState.TASK_STATE_COMPLETED);
    const content = task.artifacts[0]?.parts[0]?.content;
    expect(content).toEqual({ $case: "text", value: "beta read: the quarterly figures" });
    const arrived = seen.at(-1);
    // Signed at a.test by the caller's bridge identity, verified at b.test against a.test's directory.
    expect(arrived?.context.from).toMatch(/^a2a-[0-9a-f-]+@a\.test$/);
    expect(arrived?.context.principalId).toBe("a2a-client:agent:caller@a.test");
    expect(arrived?.body).toMatchObject({ text: "the quarterly figures" });

    // No card for an agent the peer does not have, nor for a domain this gateway does not federate with.
    for (const address of ["nobody@b.test", "beta@c.test"]) {
      const res = await fetch(`${a.url}/a2a/${address}/.well-known/agent-card.json`);
      expect(res.status, address).toBe(404);
      expect(await res.json()).toMatchObject({ error: { data: { problems: [{ path: "/agentId" }] } } });
    }
  });

  it("the MCP SDK client at a.test asks beta@b.test with ask_agent and gets beta's answer", async () => {
    const client = new Client({ name: "federation-test", version: "1.0.0" });
    await client.connect(streamableHttpClientTransport(`${a.url}/mcp`, { apiKey: callerKey }));
    try {
      const result = await client.callTool({
        name: "ask_agent",
        arguments: { name: "beta@b.test", input: { question: "ready?" } },
      });
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      expect(result.structuredContent).toEqual({ output: { text: "beta read: ready?" } });
      const arrived = seen.at(-1);
      expect(arrived?.context.from).toMatch(/^mcp-bridge-[0-9a-f]+@a\.test$/);
      expect(arrived?.body).toMatchObject({ question: "ready?" });

      const unknown = await client.callTool({
        name: "ask_agent",
        arguments: { name: "nobody@b.test", input: {} },
      });
      expect(unknown.isError).toBe(true);
      expect(JSON.stringify(unknown.content)).toContain("nobody@b.test");
    } finally {
      await client.close();
    }
  });

  it("list_agents at a.test describes beta@b.test when asked by address, then lists it among the agents it knows of", async () => {
    const client = new Client({ name: "federation-test", version: "1.0.0" });
    await client.connect(streamableHttpClientTransport(`${a.url}/mcp`, { apiKey: callerKey }));
    try {
      const listAgents = async (args: Record<string, unknown> = {}) => {
        const result = await client.callTool({ name: "list_agents", arguments: args });
        expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
        return (result.structuredContent as { agents: { name: string; description?: string }[] }).agents;
      };
      const [described, ...others] = await listAgents({ name: "beta@b.test" });
      expect(others).toEqual([]);
      expect(described).toMatchObject({ name: "beta@b.test", inputSchema: { type: "object" } });
      expect(described?.description).toContain("of b.test acting for principal-beta@b.test");

      // This gateway's agents first, then those of other domains it knows of; no bridge identity.
      const names = (await listAgents()).map((agent) => agent.name);
      expect(names).toContain("caller");
      expect(names.at(-1)).toBe("beta@b.test");
      expect(names.filter((name) => name.startsWith("mcp-bridge-"))).toEqual([]);

      // An address the peer does not have, or of a domain that is not a peer, is unknown, by name.
      for (const name of ["nobody@b.test", "beta@c.test"]) {
        const unknown = await client.callTool({ name: "list_agents", arguments: { name } });
        expect(unknown.isError, name).toBe(true);
        expect(JSON.stringify(unknown.content)).toContain(`unknown agent \\"${name}\\"`);
      }
    } finally {
      await client.close();
    }
  });

  it("list_agents at b.test shows the agents of a.test that reached it, but not a.test's MCP bridge", async () => {
    const client = new Client({ name: "federation-test", version: "1.0.0" });
    const { registered } = await b.agent("reader");
    await client.connect(streamableHttpClientTransport(`${b.url}/mcp`, { apiKey: registered.apiKey }));
    try {
      const result = await client.callTool({ name: "list_agents", arguments: {} });
      const names = (result.structuredContent as { agents: { name: string }[] }).agents.map((a) => a.name);
      // The A2A caller's bridge identity signed a request to beta: b.test looked it up to verify it.
      expect(names.filter((name) => name.endsWith("@a.test")).length).toBeGreaterThan(0);
      expect(names.filter((name) => name.startsWith("mcp-bridge-"))).toEqual([]);
      expect(names).toContain("beta");
    } finally {
      await client.close();
    }
  });
}
