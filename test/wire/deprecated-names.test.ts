import { describe, expect, it } from "vitest";
import { AgentView } from "../../src/wire/agents.js";
import {
  camelName,
  readingDeprecatedNames,
  snakeName,
  withCurrentNames,
  withDeprecatedNames,
} from "../../src/wire/deprecated-names.js";
import { MessageWithEnvelope } from "../../src/wire/messages.js";

const signing = { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" } as const;

/** An agent record as a gateway from before the one casing answered it: camelCase only. */
const oldAgentRecord = {
  agentId: "agent-alpha",
  principalId: "alice",
  signing,
  capabilities: ["calendar"],
  protocolVersions: ["1.0.0"],
  createdAt: "2026-03-01T12:00:00.000Z",
  presence: {
    state: "online",
    load: 5,
    metrics: { responseTimeMs: 12, errorRate: 0 },
    activeTasks: 1,
    tasks: [],
    lastSeen: "2026-03-01T12:00:00.000Z",
    connections: 1,
  },
};

describe("the REST API's casing and its deprecated names", () => {
  it("adds the old camelCase name of each snake_case field, at every level", () => {
    expect(
      withDeprecatedNames({ agent_id: "a", presence: { active_tasks: 1, metrics: { error_rate: 0 } } }),
    ).toEqual({
      agent_id: "a",
      agentId: "a",
      presence: { active_tasks: 1, activeTasks: 1, metrics: { error_rate: 0, errorRate: 0 } },
    });
    expect(withDeprecatedNames({ items: [{ retry_count: 0 }], next_cursor: null })).toEqual({
      items: [{ retry_count: 0, retryCount: 0 }],
      next_cursor: null,
      nextCursor: null,
    });
  });

  it("renames the same way after more distinct names than it keeps converted (a caller's own names)", () => {
    for (let i = 0; i < 3000; i++) {
      expect(camelName(`field_${i}`)).toBe(`field${i}`);
      expect(snakeName(`fieldNo${i}`)).toBe(`field_no${i}`);
    }
    expect(camelName("field_0")).toBe("field0");
    expect(camelName("retry_count")).toBe("retryCount");
    expect(snakeName("retryCount")).toBe("retry_count");
    expect(withDeprecatedNames({ next_cursor: null })).toEqual({ next_cursor: null, nextCursor: null });
  });

  it("never renames inside a signed envelope or free-form content", () => {
    const envelope = { jsonrpc: "2.0", params: { headers: { "message-id": "m1" }, body: { due_at: "x" } } };
    const record = withDeprecatedNames({ queued_at: "t", envelope, terms: { price_usd: 3 } });
    expect(record.envelope).toEqual(envelope);
    expect(record).toMatchObject({ terms: { price_usd: 3 } });
    expect(record).not.toHaveProperty("terms.priceUsd");
    expect(withCurrentNames({ queuedAt: "t", envelope: { params: { body: { dueAt: 1 } } } })).toEqual({
      queued_at: "t",
      envelope: { params: { body: { dueAt: 1 } } },
    });
  });

  it("reads each old name as its snake_case one, drops a copy that agrees, keeps one that does not", () => {
    expect(withCurrentNames({ agentId: "a", presence: { activeTasks: 1 } })).toEqual({
      agent_id: "a",
      presence: { active_tasks: 1 },
    });
    expect(withCurrentNames({ agent_id: "a", agentId: "a" })).toEqual({ agent_id: "a" });
    expect(withCurrentNames({ agent_id: "a", agentId: "b" })).toEqual({ agent_id: "a", agentId: "b" });
  });

  it("reads an older gateway's camelCase-only record, and gives it with both names", () => {
    const view = readingDeprecatedNames(AgentView).parse(oldAgentRecord);
    expect(view).toMatchObject({
      agent_id: "agent-alpha",
      principal_id: "alice",
      protocol_versions: ["1.0.0"],
      presence: { active_tasks: 1, metrics: { response_time_ms: 12 } },
      agentId: "agent-alpha",
    });
    expect(view.presence.lastSeen).toBe(oldAgentRecord.presence.lastSeen);
    const message = readingDeprecatedNames(MessageWithEnvelope).parse({
      id: "m1",
      from: "a",
      to: "b",
      status: "queued",
      kind: "request",
      method: "agent.request",
      submittedAt: "t",
      queuedAt: "t",
      retryCount: 0,
      envelope: { params: { body: { dueAt: 1 } } },
    });
    expect(message).toMatchObject({
      queued_at: "t",
      retry_count: 0,
      envelope: { params: { body: { dueAt: 1 } } },
    });
  });
});
