/**
 * A published ACP agent answers one A2A message per task: a second SendMessage naming a task that is
 * still waiting for the agent's answer is refused, naming the task, instead of being answered with
 * the first message's answer while its own answer is dropped (found by the A2A conformance kit).
 * Replayed with the unmodified A2A SDK client, blocking and streamed, and in 0.3's shape.
 */
import { type Task, TaskState } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { until } from "../../helpers/until.js";
import { rawCall, sendRequest, useA2AGateway, userMessage } from "./inbound-bed.js";

describe("A2A in: a second message to a task still working", () => {
  const bed = useA2AGateway();

  /** `helper` answers each request only when the test lets it (in order). */
  async function heldAgent() {
    const test = await bed.register("helper");
    const agent = await bed.connect(test, "helper");
    const held: ((answer: Record<string, unknown>) => void)[] = [];
    const seen: string[] = [];
    agent.onRequest(
      (body) =>
        new Promise<Record<string, unknown>>((resolve) => {
          seen.push(String(body.text));
          held.push(resolve);
        }),
    );
    const caller = await bed.register("alice-client", []);
    return { held, seen, apiKey: caller.apiKey };
  }

  it("is refused with the reason, and the first message's answer still completes the task", async () => {
    const { held, seen, apiKey } = await heldAgent();
    const client = await bed.client("helper", apiKey);
    const first = (await client.sendMessage(sendRequest("first", true))) as Task;
    await until(
      () => seen,
      (texts) => texts.length === 1,
      "the agent has the first message",
    );

    const second = { ...sendRequest("second"), message: userMessage("second", first.id) };
    const refused = await client.sendMessage(second).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toContain(
      `task ${first.id} is still waiting for helper's answer to an earlier message`,
    );
    const streamed = client.sendMessageStream(second);
    await expect(streamed.next()).rejects.toThrow(/is still waiting for helper's answer/);

    held[0]?.({ text: "answer to first" });
    const done = await until(
      () => client.getTask({ tenant: "", id: first.id, historyLength: undefined }),
      (task) => task.status?.state === TaskState.TASK_STATE_COMPLETED,
      "the task completes",
    );
    const part = done.artifacts[0]?.parts[0]?.content;
    expect(part?.$case === "text" && part.value).toBe("answer to first");
    expect(seen).toEqual(["first"]);
  });

  it("is refused in A2A 0.3's shape too, with the request's id and the field named", async () => {
    const { held, seen, apiKey } = await heldAgent();
    const client = await bed.client("helper", apiKey);
    const first = (await client.sendMessage(sendRequest("first", true))) as Task;
    const refused = await rawCall(
      bed,
      "helper",
      {
        jsonrpc: "2.0",
        id: "second",
        method: "message/send",
        params: {
          message: {
            kind: "message",
            messageId: "m2",
            role: "user",
            taskId: first.id,
            parts: [{ kind: "text", text: "second" }],
          },
        },
      },
      apiKey,
    );
    expect(refused.json).toMatchObject({
      id: "second",
      error: {
        code: -32004,
        data: [{ fieldViolations: [{ field: "params.message.taskId" }] }],
      },
    });
    await until(
      () => seen,
      (texts) => texts.length > 0,
      "the agent has the first message",
    );
    expect(seen).toEqual(["first"]);
    held[0]?.({ text: "answer to first" });
  });
});
