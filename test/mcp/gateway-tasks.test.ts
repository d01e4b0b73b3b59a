import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import type { AcpSignParams } from "../../src/mcp/messages.js";
import { ACP_SIGNING_CAPABILITIES, registerAcpSigning } from "../../src/mcp/proxy-signing.js";
import type { TestAgent } from "../helpers/gateway.js";
import { type McpGatewayBed, type McpTransportKind, until, useMcpGateway } from "../helpers/mcp-gateway.js";

const TASK = {
  completed: ["read the brief"],
  remaining: ["translate chapter 2 into French"],
  context: { source: "https://example.org/ch2", words: 4200 },
};

/** A delegator (boss) and a delegate (worker) whose offers wait for a decision made over MCP. */
async function parties(bed: McpGatewayBed) {
  const boss = await bed.member("boss");
  const worker = await bed.member("worker", ["translate"]);
  const bossCollab = new CollabClient({
    agent: boss.agent,
    identity: boss.test.identity,
    apiKey: boss.test.apiKey,
  });
  const workerCollab = new CollabClient({
    agent: worker.agent,
    identity: worker.test.identity,
    apiKey: worker.test.apiKey,
  });
  workerCollab.handoffs.onOffer(worker.agent, () => undefined); // decided later, over MCP
  return { boss, worker, bossCollab, workerCollab };
}

/** An SDK Client that holds `agent`'s key and signs what the gateway's task tools ask it to. */
async function signingClient(
  bed: McpGatewayBed,
  kind: McpTransportKind,
  agent: TestAgent,
  signed: AcpSignParams[],
) {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const client = new Client({ name: "signer", version: "1.0.0" }, { capabilities: ACP_SIGNING_CAPABILITIES });
  registerAcpSigning(client, agent.identity, { onSign: (params) => signed.push(params) });
  await client.connect(bed.transport(kind, agent.apiKey));
  bed.cleanup(() => client.close());
  return client;
}

function updates(client: Client): string[] {
  const uris: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    uris.push(n.params.uri);
  });
  return uris;
}

async function readJson(client: Client, uri: string): Promise<Record<string, unknown>> {
  const { contents } = await client.readResource({ uri });
  return JSON.parse((contents[0] as { text: string }).text) as Record<string, unknown>;
}

const text = (result: unknown) =>
  ((result as { content: { text: string }[] }).content[0] as { text: string }).text;

describe("tasks at the gateway's MCP endpoint: resources, subscription, tools, prompt", () => {
  const bed = useMcpGateway();

  it.each(["streamable", "sse"] as const)(
    "%s: a subscriber to tasks://pending is notified when a real handoff arrives, and reads it",
    async (kind) => {
      const { worker, bossCollab } = await parties(bed);
      const client = await bed.sdkClient(kind, worker.test.apiKey);
      const notified = updates(client);
      expect(await readJson(client, "tasks://pending")).toEqual({ agentId: "worker", tasks: [] });
      await client.subscribeResource({ uri: "tasks://pending" });

      const offered = await bossCollab.handoffs.offer("worker", TASK, {
        title: "Chapter 2",
        requires: ["translate"],
      });
      await until(
        () => notified,
        (n) => n.includes("tasks://pending"),
        "tasks://pending is notified",
      );
      const pending = await readJson(client, "tasks://pending");
      expect(pending.tasks).toEqual([
        expect.objectContaining({
          id: offered.handoffId,
          uri: `tasks://${offered.handoffId}`,
          title: "Chapter 2",
          from: "boss",
          status: "offered",
          requires: ["translate"],
        }),
      ]);
      const task = await readJson(client, `tasks://${offered.handoffId}`);
      expect(task).toMatchObject({
        status: "offered",
        delegator: "boss",
        handoff: { ...TASK, task: { title: "Chapter 2" } },
      });
      const listed = await client.listResources();
      expect(listed.resources.map((r) => r.uri)).toEqual(["tasks://pending", `tasks://${offered.handoffId}`]);

      await client.unsubscribeResource({ uri: "tasks://pending" });
      expect(bed.mcp.stats().subscriptions).toBe(0);
    },
  );

  it.each(["streamable", "sse"] as const)(
    "%s: accept, message and submit the result with the tools, each signed by the MCP client's key",
    async (kind) => {
      const { worker, bossCollab, boss } = await parties(bed);
      const heard: string[] = [];
      bossCollab.on("handoff", (notice) =>
        heard.push(`${notice.method} ${JSON.stringify(notice.body.note ?? notice.body.result ?? "")}`),
      );
      const signed: AcpSignParams[] = [];
      const client = await signingClient(bed, kind, worker.test, signed);
      const offered = await bossCollab.handoffs.offer("worker", TASK, { requires: ["translate"] });
      const taskUpdates = updates(client);
      await client.subscribeResource({ uri: `tasks://${offered.handoffId}` });

      const accepted = await client.callTool({
        name: "accept_task",
        arguments: { taskId: offered.handoffId },
      });
      expect(accepted.isError).toBeFalsy();
      expect(text(accepted)).toBe(`Task ${offered.handoffId} accepted; it is now accepted.`);
      const message = await client.callTool({
        name: "add_task_message",
        arguments: { taskId: offered.handoffId, text: "half way", progress: 50 },
      });
      expect(text(message)).toBe(`Task ${offered.handoffId} got your message; it is now accepted.`);
      const done = await client.callTool({
        name: "submit_task_result",
        arguments: { taskId: offered.handoffId, result: { url: "https://example.org/ch2.fr" } },
      });
      expect(text(done)).toBe(`Task ${offered.handoffId} completed; it is now completed.`);

      expect(signed.map((s) => [s.method, s.to, s.body])).toEqual([
        ["agent.handoff.accept", "boss", { handoffId: offered.handoffId }],
        ["agent.handoff.progress", "boss", { handoffId: offered.handoffId, progress: 50, note: "half way" }],
        [
          "agent.handoff.complete",
          "boss",
          { handoffId: offered.handoffId, result: { url: "https://example.org/ch2.fr" } },
        ],
      ]);
      const record = await bossCollab.handoffs.get(offered.handoffId);
      expect(record).toMatchObject({ status: "completed", result: { url: "https://example.org/ch2.fr" } });
      expect(record.events.map((e) => [e.status, e.by])).toEqual([
        ["offered", "boss"],
        ["accepted", "worker"],
        ["progress", "worker"],
        ["completed", "worker"],
      ]);
      await until(
        () => heard,
        (h) => h.length === 3,
        "the delegator hears each step from the worker",
      );
      expect(heard).toEqual([
        'agent.handoff.accept ""',
        'agent.handoff.progress "half way"',
        'agent.handoff.complete {"url":"https://example.org/ch2.fr"}',
      ]);
      await until(
        () => taskUpdates.length,
        (n) => n >= 3,
        `tasks://${offered.handoffId} is notified of each change`,
      );
      expect(boss.errors).toEqual([]);
    },
  );

  it("reports a failure, and refuses steps the lifecycle does not allow, with the gateway's reason", async () => {
    const { worker, bossCollab } = await parties(bed);
    const client = await signingClient(bed, "streamable", worker.test, []);
    const offered = await bossCollab.handoffs.offer("worker", TASK, { requires: ["translate"] });
    const early = await client.callTool({
      name: "submit_task_result",
      arguments: { taskId: offered.handoffId, result: 1 },
    });
    expect(early.isError).toBe(true);
    expect(text(early)).toBe(
      `cannot complete handoff ${offered.handoffId}: it is offered, and complete is allowed only when accepted`,
    );
    await client.callTool({ name: "accept_task", arguments: { taskId: offered.handoffId } });
    const failed = await client.callTool({
      name: "report_task_failure",
      arguments: { taskId: offered.handoffId, reason: "the source is gone" },
    });
    expect(text(failed)).toBe(`Task ${offered.handoffId} failed; it is now failed.`);
    expect(await bossCollab.handoffs.get(offered.handoffId)).toMatchObject({
      status: "failed",
      reason: "the source is gone",
    });
    const unknown = await client.callTool({ name: "accept_task", arguments: { taskId: "no-such-task" } });
    expect(text(unknown)).toBe("no task no-such-task involving worker");
    // Arguments the tool's schema refuses: a tool error the model can read and correct (SEP-1303).
    const missing = await client.callTool({
      name: "report_task_failure",
      arguments: { taskId: offered.handoffId },
    });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toMatch(/\/params\/arguments\/reason: /);
  });

  it("tells a client that cannot sign how to get its key involved, and changes nothing", async () => {
    const { worker, bossCollab } = await parties(bed);
    const client = await bed.sdkClient("streamable", worker.test.apiKey);
    const offered = await bossCollab.handoffs.offer("worker", TASK, { requires: ["translate"] });
    const result = await client.callTool({ name: "accept_task", arguments: { taskId: offered.handoffId } });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(
      /^agent.handoff.accept must be signed with worker's key, and this MCP client cannot sign: connect through `acp mcp serve --gateway URL --api-key KEY --key-file AGENT.json`/,
    );
    expect((await bossCollab.handoffs.get(offered.handoffId)).status).toBe("offered");
  });

  it("refuses to read or watch a task of other agents", async () => {
    const { bossCollab } = await parties(bed);
    const outsider = await bed.register("outsider");
    const client = await bed.sdkClient("streamable", outsider.apiKey);
    const offered = await bossCollab.handoffs.offer("worker", TASK, { requires: ["translate"] });
    await expect(client.readResource({ uri: `tasks://${offered.handoffId}` })).rejects.toThrow(
      `no task ${offered.handoffId} involving outsider`,
    );
    await expect(client.subscribeResource({ uri: `tasks://${offered.handoffId}` })).rejects.toThrow(
      /involving outsider/,
    );
    await expect(client.subscribeResource({ uri: "nope://x" })).rejects.toThrow(
      "nope://x is not a resource this server can notify about",
    );
  });

  it("answers a resource URI that is not a URI with -32602 naming the field", async () => {
    const outsider = await bed.register("uri-fuzzer");
    const client = await bed.sdkClient("streamable", outsider.apiKey);
    for (const call of [
      () => client.readResource({ uri: "not a uri" }),
      () => client.subscribeResource({ uri: "::" }),
    ]) {
      await expect(call()).rejects.toMatchObject({
        code: -32602,
        data: {
          reason: "InvalidParams",
          problems: [{ path: "/params/uri", message: "not an absolute URI" }],
        },
      });
    }
  });

  it("offers a system-prompt describing the agent's role, tools and pending tasks", async () => {
    const { worker, bossCollab } = await parties(bed);
    await bossCollab.handoffs.offer("worker", TASK, { requires: ["translate"] });
    const client = await bed.sdkClient("streamable", worker.test.apiKey);
    const { prompts } = await client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(["system-prompt"]);
    const prompt = await client.getPrompt({ name: "system-prompt" });
    const body = (prompt.messages[0]?.content as { text?: string } | undefined)?.text ?? "";
    expect(body).toContain('You are the ACP agent "worker", acting for the principal "principal-worker"');
    expect(body).toContain("Your registered capabilities: translate.");
    expect(body).toContain("You have 1 pending task.");
    for (const tool of [
      "accept_task",
      "add_task_message",
      "submit_task_result",
      "report_task_failure",
      "list_agents",
      "ask_agent",
    ]) {
      expect(body).toContain(tool);
    }
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "accept_task",
      "add_task_message",
      "ask_agent",
      "decline_task",
      "list_agents",
      "report_task_failure",
      "submit_task_result",
    ]);
  });
});
