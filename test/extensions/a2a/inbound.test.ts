import { type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import type { InboundContext } from "../../../src/client/index.js";
import { until } from "../../helpers/until.js";
import { rawCall, sendRequest, useA2AGateway } from "./inbound-bed.js";

const textOf = (task: Task): string | undefined => {
  const content = task.artifacts[0]?.parts[0]?.content;
  return content?.$case === "text" ? content.value : undefined;
};
const isTask = (result: unknown): result is Task =>
  typeof result === "object" && result !== null && "status" in result;

describe("A2A clients calling ACP agents", () => {
  const bed = useA2AGateway();

  async function echoAgent() {
    const test = await bed.register("helper", ["a2a", "summarize"]);
    const agent = await bed.connect(test, "helper");
    const seen: { body: Record<string, unknown>; context: InboundContext }[] = [];
    agent.onRequest((body, context) => {
      seen.push({ body, context });
      return { text: `echo: ${String(body.text)}` };
    });
    let handshakes = 0;
    agent.on("handshake", (event) => {
      if (event.step === "trust") handshakes++;
    });
    return { test, agent, seen, handshakes: () => handshakes };
  }

  it("publishes an opted-in agent's card (skills, security) and no card for others", async () => {
    await echoAgent();
    await bed.register("private-agent", ["summarize"]);
    const caller = await bed.register("alice-client", []);
    const client = await bed.client("helper", caller.apiKey);
    const card = await client.getAgentCard();
    expect(card.name).toBe("helper");
    expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    expect(card.supportedInterfaces[0]).toMatchObject({
      url: `${bed.gw.url}/a2a/helper`,
      protocolBinding: "JSONRPC",
      protocolVersion: "1.0",
    });
    expect(Object.keys(card.securitySchemes).sort()).toEqual(["apiKey", "bearer"]);
    expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: true });
    const hidden = await fetch(`${bed.gw.url}/a2a/private-agent/.well-known/agent-card.json`);
    expect(hidden.status).toBe(404);
    expect(JSON.stringify(await hidden.json())).toContain("not registered with the capability a2a");
  });

  it("turns message/send into a signed agent.request from a bridge identity naming the caller; one handshake", async () => {
    const target = await echoAgent();
    const caller = await bed.register("alice-client", []);
    const client = await bed.client("helper", caller.apiKey);
    const first = await client.sendMessage(sendRequest("hello"));
    if (!isTask(first)) throw new Error(`expected a task, got ${JSON.stringify(first)}`);
    expect(first.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(first)).toBe("echo: hello");
    const second = await client.sendMessage(sendRequest("again"));
    expect(isTask(second) && textOf(second)).toBe("echo: again");

    expect(target.seen).toHaveLength(2);
    const { body, context } = target.seen[0]!;
    expect(body).toMatchObject({ text: "hello", parts: [{ text: "hello" }], a2a: { taskId: first.id } });
    expect(context.principalId).toBe("a2a-client:agent:alice-client");
    expect(context.from).toMatch(/^a2a-[0-9a-f]{8}-[0-9a-f]{16}$/);
    expect(context.method).toBe("agent.request");
    expect(target.seen[1]!.context.from).toBe(context.from);
    expect(target.handshakes()).toBe(1);
    // The bridge reaches the relay in-process: the only WebSocket is the target's.
    const metrics = await (await fetch(`${bed.gw.url}/metrics`)).text();
    expect(metrics).toMatch(/^acp_ws_connections 1$/m);

    // The relay persisted and audited both exchanges like any other message.
    const listed = await fetch(`${bed.gw.url}/api/v1/messages?type=request`, {
      headers: { "x-api-key": target.test.apiKey },
    });
    const text = await listed.text();
    expect(listed.status, text).toBe(200);
    expect(text).toContain(context.from);

    // Another client gets its own bridge identity, and cannot read the first client's task.
    const bob = await bed.register("bob-client", []);
    const bobClient = await bed.client("helper", bob.apiKey);
    await expect(bobClient.getTask({ tenant: "", id: first.id })).rejects.toMatchObject({
      name: "TaskNotFoundError",
    });
    await bobClient.sendMessage(sendRequest("from bob"));
    expect(target.seen[2]!.context.principalId).toBe("a2a-client:agent:bob-client");
    expect(target.seen[2]!.context.from).not.toBe(context.from);
  });

  it("streams status and the agent's progress as SSE (message/stream)", async () => {
    const test = await bed.register("helper", ["a2a"]);
    const agent = await bed.connect(test, "helper");
    agent.onRequest(async (body, context) => {
      const a2a = body.a2a as { taskId: string };
      await agent.notify(
        context.from,
        { taskId: a2a.taskId, text: "halfway" },
        { method: "agent.a2a.progress" },
      );
      return { text: "done", count: 2 };
    });
    const caller = await bed.register("alice-client", []);
    const client = await bed.client("helper", caller.apiKey);
    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(sendRequest("work"))) events.push(event);
    const summary = events.map((e) =>
      e.payload?.$case === "statusUpdate"
        ? `status:${TaskState[e.payload.value.status?.state ?? 0]}`
        : (e.payload?.$case ?? "none"),
    );
    expect(summary, JSON.stringify(events.at(-1))).toEqual([
      "task",
      "status:TASK_STATE_WORKING",
      "status:TASK_STATE_WORKING",
      "artifactUpdate",
      "status:TASK_STATE_COMPLETED",
    ]);
    const progress = events[2]?.payload;
    expect(progress?.$case === "statusUpdate" && progress.value.status?.message?.parts[0]?.content).toEqual({
      $case: "text",
      value: "halfway",
    });
    const artifact = events[3]?.payload;
    expect(artifact?.$case === "artifactUpdate" && artifact.value.artifact?.parts[0]?.content).toEqual({
      $case: "data",
      value: { text: "done", count: 2 },
    });
  });

  it("gets, resubscribes to and cancels a running task; the agent is told to stop", async () => {
    const test = await bed.register("helper", ["a2a"]);
    const agent = await bed.connect(test, "helper");
    let release: (() => void) | undefined;
    agent.onRequest(async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return { text: "too late" };
    });
    const cancels: Record<string, unknown>[] = [];
    agent.onNotification((body, context) => {
      if (context.method === "agent.a2a.cancel") cancels.push(body);
    });
    bed.cleanup(async () => release?.());
    const caller = await bed.register("alice-client", []);
    const client = await bed.client("helper", caller.apiKey);

    const started = await client.sendMessage(sendRequest("long job", true));
    if (!isTask(started)) throw new Error("expected a task");
    const working = await until(
      () => client.getTask({ tenant: "", id: started.id }),
      (task) => task.status?.state === TaskState.TASK_STATE_WORKING,
      "the task is WORKING",
    );
    expect(working.history[0]?.parts[0]?.content).toEqual({ $case: "text", value: "long job" });
    await until(
      () => release,
      (r) => r !== undefined,
      "the agent got the request",
    );

    const resubscribed: StreamResponse[] = [];
    const following = (async () => {
      for await (const event of client.resubscribeTask({ tenant: "", id: started.id }))
        resubscribed.push(event);
    })();
    await until(
      () => resubscribed.length,
      (n) => n >= 1,
      "the resubscription's first event",
    );
    const canceled = await client.cancelTask({ tenant: "", id: started.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await following;
    const last = resubscribed.at(-1)?.payload;
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await until(
      () => cancels,
      (c) => c.length === 1,
      "the agent received agent.a2a.cancel",
    );
    expect(cancels[0]).toEqual({ taskId: started.id });

    // The agent's late answer does not revive the task; canceling again is idempotent, a done task is not cancelable.
    release?.();
    agent.onRequest(() => ({ text: "quick" }));
    // The answer to this later request comes the same way after the late one: by then that one arrived too.
    const done = await client.sendMessage(sendRequest("quick"));
    if (!isTask(done)) throw new Error("expected a task");
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await client.getTask({ tenant: "", id: started.id })).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
    const refused = await rawCall(
      bed,
      "helper",
      { jsonrpc: "2.0", id: 9, method: "CancelTask", params: { id: done.id } },
      caller.apiKey,
    );
    expect(refused.json.error).toMatchObject({ code: -32002 });
  });

  it("answers a blocking SendMessage still waiting for its agent when the gateway shuts down", async () => {
    const test = await bed.register("helper", ["a2a"]);
    const agent = await bed.connect(test, "helper");
    let release: (() => void) | undefined;
    agent.onRequest(async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return {};
    });
    bed.cleanup(async () => release?.());
    const caller = await bed.register("alice-client", []);
    const client = await bed.client("helper", caller.apiKey);
    const waiting = client.sendMessage(sendRequest("slow")).then(
      () => new Error("answered"),
      (err: unknown) => err as Error,
    );
    await until(
      () => bed.a2a.stats(),
      (stats) => stats.tasks === 1 && stats.answering === 1,
      "the call waits for the agent",
    );
    // close() does not wait for the handler, which never returns before cleanup: a close that
    // waited would fail this test by its timeout.
    await bed.gw.gateway.close();
    expect((await waiting).message).toContain("the gateway is shutting down");
    expect(bed.a2a.stats()).toEqual({ answering: 0, tasks: 0 });
  });
});
