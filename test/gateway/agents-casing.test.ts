import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GatewayClient } from "../../src/client/index.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { AgentView, PresenceView, registrationOf } from "../../src/wire/agents.js";
import { api, type TestAgent, type TestGateway, startTestGateway } from "../helpers/gateway.js";

/**
 * The agent records of the REST API in its one casing, snake_case: what `/api/v1/agents…` answers,
 * what it reads, and the camelCase names it still sends and reads for the deprecation period.
 */
describe("the agent records in snake_case, the camelCase names deprecated", () => {
  let gw: TestGateway;
  let alpha: TestAgent;
  const admin = () => ({ authorization: `Bearer ${gw.adminToken}` });

  beforeEach(async () => {
    gw = await startTestGateway();
    alpha = await gw.register("agent-alpha", "alice", { capabilities: ["calendar"] });
  });
  afterEach(async () => {
    await gw.close();
  });

  it("answers an agent, the list and its presence in snake_case, each also under its old name", async () => {
    const one = (await api(gw.url, "/api/v1/agents/agent-alpha", { apiKey: alpha.apiKey })).json;
    expect(one).toMatchObject({
      agent_id: "agent-alpha",
      principal_id: "alice",
      capabilities: ["calendar"],
      protocol_versions: ["1.0.0"],
      created_at: expect.any(String),
      presence: {
        state: "offline",
        active_tasks: 0,
        last_seen: expect.any(String),
        metrics: { response_time_ms: 0, error_rate: 0 },
      },
    });
    expect(AgentView.parse(one)).toMatchObject({ agent_id: "agent-alpha" });
    const { agents } = (await api(gw.url, "/api/v1/agents", { apiKey: alpha.apiKey })).json as {
      agents: Record<string, unknown>[];
    };
    expect(agents).toEqual([one]);
    // The names of before, next to the new ones, at every level.
    expect(one).toMatchObject({
      agentId: "agent-alpha",
      principalId: "alice",
      protocolVersions: ["1.0.0"],
      createdAt: one.created_at,
      presence: {
        activeTasks: 0,
        lastSeen: expect.any(String),
        metrics: { responseTimeMs: 0, errorRate: 0 },
      },
    });
  });

  it("registers from a snake_case body, and still from the camelCase one; answers both names", async () => {
    const snake = registrationOf(publicIdentity(generateIdentity("agent-snake", "bob")));
    const made = await api(gw.url, "/api/v1/agents", {
      headers: admin(),
      body: { ...snake, protocol_versions: ["1.0.0"] },
    });
    expect(made.status).toBe(201);
    expect(made.json).toEqual({
      agent_id: "agent-snake",
      api_key: expect.stringMatching(/^acp_/),
      agentId: "agent-snake",
      apiKey: made.json.api_key,
    });
    const camel = await api(gw.url, "/api/v1/agents", {
      headers: admin(),
      body: { ...publicIdentity(generateIdentity("agent-camel", "carol")), protocolVersions: ["1.0.0"] },
    });
    expect(camel.status).toBe(201);
    const view = await api(gw.url, "/api/v1/agents/agent-camel", { apiKey: String(camel.json.api_key) });
    expect(view.json).toMatchObject({ agent_id: "agent-camel", principal_id: "carol" });
  });

  it("refuses a body whose two names of one field disagree, or a bad value, naming the field", async () => {
    const body = registrationOf(publicIdentity(generateIdentity("agent-x", "bob")));
    const torn = await api(gw.url, "/api/v1/agents", {
      headers: admin(),
      body: { ...body, agentId: "agent-y" },
    });
    expect(torn.status).toBe(400);
    expect(torn.json.error).toMatchObject({ code: -32602, data: { problems: [{ path: "" }] } });
    expect(JSON.stringify(torn.json.error)).toContain("agentId");
    const bad = await api(gw.url, "/api/v1/agents", {
      headers: admin(),
      body: { ...body, protocol_versions: [] },
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ data: { problems: [{ path: "/protocol_versions" }] } });
    for (const agentId of ["agent-x", "agent-y"]) {
      expect((await api(gw.url, `/api/v1/agents/${agentId}`, { apiKey: alpha.apiKey })).status).toBe(404);
    }
  });

  it("takes a presence update in snake_case, and in camelCase; answers the presence in both", async () => {
    const path = "/api/v1/agents/agent-alpha/presence";
    const snake = await api(gw.url, path, {
      method: "PUT",
      apiKey: alpha.apiKey,
      body: { state: "busy", active_tasks: 2, metrics: { response_time_ms: 120, error_rate: 0.1 } },
    });
    expect(snake.status).toBe(200);
    // Not connected: it reads as offline, whatever state it chose; what it reported is kept.
    expect(PresenceView.parse(snake.json)).toMatchObject({
      active_tasks: 2,
      metrics: { response_time_ms: 120, error_rate: 0.1 },
    });
    expect(snake.json).toMatchObject({ activeTasks: 2, metrics: { responseTimeMs: 120, errorRate: 0.1 } });
    const camel = await api(gw.url, path, { method: "PUT", apiKey: alpha.apiKey, body: { activeTasks: 3 } });
    expect(camel.json).toMatchObject({ active_tasks: 3, metrics: { response_time_ms: 120 } });
    const view = await api(gw.url, "/api/v1/agents/agent-alpha", { apiKey: alpha.apiKey });
    expect(view.json.presence).toMatchObject({ active_tasks: 3, metrics: { response_time_ms: 120 } });
    const bad = await api(gw.url, path, { method: "PUT", apiKey: alpha.apiKey, body: { active_tasks: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ data: { problems: [{ path: "/active_tasks" }] } });
    const unknown = await api(gw.url, path, { method: "PUT", apiKey: alpha.apiKey, body: { mood: "happy" } });
    expect(unknown.status).toBe(400);
  });

  it("answers a rotation and a revocation in snake_case, the old names too", async () => {
    const rotated = await api(gw.url, "/api/v1/agents/agent-alpha/rotate", { headers: admin(), body: {} });
    expect(rotated.json).toMatchObject({ agent_id: "agent-alpha", api_key: expect.any(String) });
    expect(rotated.json.apiKey).toBe(rotated.json.api_key);
    const revoked = await api(gw.url, "/api/v1/agents/agent-alpha/revoke", { headers: admin(), body: {} });
    expect(revoked.json).toEqual({
      agent_id: "agent-alpha",
      revoked_at: expect.any(String),
      agentId: "agent-alpha",
      revokedAt: revoked.json.revoked_at,
    });
  });

  it("the SDK sends snake_case, takes the old input names, and gives records with both names", async () => {
    const client = new GatewayClient({ gateway: gw.url, adminToken: gw.adminToken });
    const identity = publicIdentity(generateIdentity("agent-sdk", "dave"));
    const registered = await client.registerAgent(identity); // the deprecated camelCase input
    expect(registered).toMatchObject({ agent_id: "agent-sdk", api_key: expect.any(String) });
    expect(registered.apiKey).toBe(registered.api_key);
    const view = await client.getAgent("agent-sdk");
    expect(view.principal_id).toBe("dave");
    expect(view.principalId).toBe("dave");
    expect(view.presence.last_seen).toBe(view.presence.lastSeen);
    const agents = await client.listAgents();
    expect(agents.map((a) => a.agent_id).sort()).toEqual(["agent-alpha", "agent-sdk"]);
    const asAgent = new GatewayClient({ gateway: gw.url, apiKey: registered.api_key });
    const presence = await asAgent.updatePresence("agent-sdk", { activeTasks: 4, load: 40 });
    expect(presence).toMatchObject({ active_tasks: 4, load: 40, activeTasks: 4 });
    expect((await client.revokeAgent("agent-sdk")).revoked_at).toEqual(expect.any(String));
  });
});
