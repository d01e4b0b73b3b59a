/**
 * An external A2A agent registered with add-a2a is an ACP agent id on every surface of the gateway:
 * online in presence while the bridge serves it, runnable from MCP (`agents/run`), and never
 * published back to A2A clients as if it were an ACP agent that opted in with `a2a`.
 */
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { AgentsClient, streamableHttpClientTransport } from "../../../../src/mcp/index.js";
import { ADMIN_TOKEN, api, startTestGateway } from "../../../helpers/gateway.js";
import { useTmpDir } from "../../../helpers/tmp.js";
import { until } from "../../../helpers/until.js";
import { startA2AServer } from "./a2a-server.js";
import { useOutboundBed } from "./testbed.js";

interface AgentView {
  capabilities: string[];
  presence: { state: string; lastSeen: string };
}

describe("A2A out: an external A2A agent on every surface", () => {
  const bed = useOutboundBed();

  it("is online while the bridge serves it, and offline once removed", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    const before = Date.now();
    expect((await bed.addA2A({ url: server.url, agent_id: "echo" })).status).toBe(201);
    const alice = await bed.gw.register("alice");
    const view = (await api(bed.gw.url, "/api/v1/agents/echo", { apiKey: alice.apiKey }))
      .json as unknown as AgentView;
    expect(view.presence.state).toBe("online");
    expect(Date.parse(view.presence.lastSeen)).toBeGreaterThanOrEqual(before - 1000);

    const removed = await api(bed.gw.url, "/api/v1/a2a/remote-agents/echo", {
      method: "DELETE",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(removed.status).toBe(200);
    const presence = await bed.gw.gateway.context.presence.get("echo");
    expect(presence.state).toBe("offline");
  });

  it("answers MCP agents/run like any agent", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    const alice = await bed.gw.register("alice");
    const client = await AgentsClient.connect(
      streamableHttpClientTransport(`${bed.gw.url}/mcp`, { apiKey: alice.apiKey }),
    );
    bed.cleanup(() => client.close());
    expect((await client.listAgents()).map((agent) => agent.name)).toContain("echo");
    const output = await client.runAgent("echo", { text: "hello" });
    expect(output).toMatchObject({
      text: "done: hello\nupper: HELLO",
      a2a: { kind: "task", state: "completed" },
    });
    // And as a tool, for hosts that show a model only tools.
    const host = new Client({ name: "host", version: "1.0.0" });
    await host.connect(streamableHttpClientTransport(`${bed.gw.url}/mcp`, { apiKey: alice.apiKey }));
    bed.cleanup(() => host.close());
    const asked = (await host.callTool({
      name: "ask_agent",
      arguments: { name: "echo", input: "again" },
    })) as CallToolResult;
    expect(asked.structuredContent).toMatchObject({ output: { text: "done: again\nupper: AGAIN" } });
    expect(server.received).toEqual(["hello", "again"]);
  });

  it("is not published to A2A clients: no card, no endpoint, nothing sent to the agent", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    const added = await bed.addA2A({ url: server.url, agent_id: "echo" });
    expect(added.status).toBe(201);
    const alice = await bed.gw.register("alice");
    const view = (await api(bed.gw.url, "/api/v1/agents/echo", { apiKey: alice.apiKey }))
      .json as unknown as AgentView;
    expect(view.capabilities).toEqual(["a2a-remote", "echo"]);

    const card = await fetch(`${bed.gw.url}/a2a/echo/.well-known/agent-card.json`);
    expect(card.status).toBe(404);
    const send = await api(bed.gw.url, "/a2a/echo", {
      apiKey: alice.apiKey,
      body: {
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hello" }] } },
      },
    });
    expect(send.status).toBe(404);
    expect(server.received).toEqual([]);
  });

  it("keeps a card skill named a2a out of the capabilities", async () => {
    const server = await bed.a2a({
      behaviour: "echo-task",
      card: (card) => ({ ...card, skills: card.skills.map((skill) => ({ ...skill, id: "a2a" })) }),
    });
    const added = await bed.addA2A({ url: server.url, agent_id: "echo" });
    expect(added.json.skills).toEqual(["a2a"]);
    expect((await bed.gw.gateway.context.registry.get("echo"))?.capabilities).toEqual(["a2a-remote"]);
    expect((await fetch(`${bed.gw.url}/a2a/echo/.well-known/agent-card.json`)).status).toBe(404);
  });
});

describe("A2A out: an agent an older gateway registered with the capability a2a", () => {
  const tmp = useTmpDir("acp-a2a-upgrade-");

  it("gets a2a-remote instead at the next start, and its A2A card is gone", async () => {
    const data = join(tmp(), "data");
    const server = await startA2AServer({ behaviour: "echo-task" });
    let gw = await startTestGateway({ dataDir: data, allowPrivateUrls: true });
    try {
      const added = await api(gw.url, "/api/v1/a2a/remote-agents", {
        body: { url: server.url, agent_id: "echo" },
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(added.status).toBe(201);
      // What an older gateway registered.
      await gw.gateway.context.registry.setCapabilities("echo", ["a2a", "echo"]);
      expect((await fetch(`${gw.url}/a2a/echo/.well-known/agent-card.json`)).status).toBe(200);
      await gw.close();

      gw = await startTestGateway({ dataDir: data, allowPrivateUrls: true });
      const registry = gw.gateway.context.registry;
      await until(
        async () => (await registry.get("echo"))?.capabilities,
        (capabilities) => JSON.stringify(capabilities) === JSON.stringify(["a2a-remote", "echo"]),
        "the registration is upgraded",
      );
      expect((await fetch(`${gw.url}/a2a/echo/.well-known/agent-card.json`)).status).toBe(404);
    } finally {
      await gw.close();
      await server.close();
    }
  });
});
