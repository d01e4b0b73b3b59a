import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Task, TaskState } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { a2aInboundExtension } from "../../../src/extensions/a2a/inbound/extension.js";
import { filesContaining } from "../../helpers/files.js";
import { startTestGateway } from "../../helpers/gateway.js";
import { until } from "../../helpers/until.js";
import { type A2ABed, rawCall, sendRequest, useA2AGateway } from "./inbound-bed.js";

/** A push notification token: the gateway stores it sealed. */
const PUSH_TOKEN = "push-token-of-alice-7c1e94";

const badRequest = (json: Record<string, unknown>) =>
  (
    (json.error as { data?: { fieldViolations?: { field: string }[] }[] }).data?.[0]?.fieldViolations ?? []
  ).map((v) => v.field);

describe("A2A bridge: bad payloads", () => {
  const bed = useA2AGateway();

  it("answers bad A2A payloads with JSON-RPC errors naming the field", async () => {
    await bed.register("helper", ["a2a"]);
    const { apiKey } = await bed.register("alice-client", []);
    const send = (params: unknown) =>
      rawCall(bed, "helper", { jsonrpc: "2.0", id: 1, method: "SendMessage", params }, apiKey);

    const noParts = await send({ message: { messageId: "m1", role: "ROLE_USER", parts: [] } });
    expect(noParts.json.error).toMatchObject({ code: -32602 });
    expect(badRequest(noParts.json)).toEqual(["params.message.parts"]);
    expect(noParts.json.id).toBe(1);

    const twoKinds = await send({
      message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "a", url: "u" }] },
    });
    expect(badRequest(twoKinds.json)).toEqual(["params.message.parts[0]"]);
    expect((twoKinds.json.error as { message: string }).message).toContain(
      "exactly one of text, raw, url or data",
    );

    const badRole = await send({ message: { messageId: "m1", role: "user", parts: [{ text: "a" }] } });
    expect(badRequest(badRole.json)).toEqual(["params.message.role"]);

    const noMessageId = await send({ message: { role: "ROLE_USER", parts: [{ text: "a" }] } });
    expect(badRequest(noMessageId.json)).toEqual(["params.message.messageId"]);

    const unknown = await rawCall(bed, "helper", { jsonrpc: "2.0", id: 2, method: "tasks/send" }, apiKey);
    expect(unknown.json.error).toMatchObject({ code: -32601 });
    expect(badRequest(unknown.json)).toEqual(["method"]);

    const notRpc = await rawCall(bed, "helper", { jsonrpc: "1.0", id: 3, method: "GetTask" }, apiKey);
    expect(notRpc.json.error).toMatchObject({ code: -32600 });
    expect(badRequest(notRpc.json)).toEqual(["jsonrpc"]);
    // As the A2A conformance kit sends it: answered with the request's id, each field named once.
    const noMethod = await rawCall(bed, "helper", { jsonrpc: "1.0", id: "tck-7" }, apiKey);
    expect(noMethod.json).toMatchObject({
      id: "tck-7",
      error: {
        code: -32600,
        message: 'invalid JSON-RPC request: jsonrpc must be exactly "2.0"; method must be a string',
      },
    });
    expect(badRequest(noMethod.json)).toEqual(["jsonrpc", "method"]);
    const badId = await rawCall(bed, "helper", { jsonrpc: "2.0", id: { no: 1 }, method: "GetTask" }, apiKey);
    expect(badId.json).toMatchObject({ id: null, error: { code: -32600 } });
    expect(badRequest(badId.json)).toEqual(["id"]);

    const list = (params: Record<string, unknown>) =>
      rawCall(bed, "helper", { jsonrpc: "2.0", id: 6, method: "ListTasks", params }, apiKey);
    for (const [params, field, description] of [
      [{ historyLength: -1 }, "params.historyLength", "must be 0 or more"],
      [{ statusTimestampAfter: "-1" }, "params.statusTimestampAfter", "must be an RFC 3339 timestamp"],
      [{ pageSize: 0 }, "params.pageSize", "must be 1 or more"],
      [{ pageSize: 101 }, "params.pageSize", "must be 100 or less"],
      [{ status: "done" }, "params.status", "must be a TaskState"],
    ] as const) {
      const refused = await list(params);
      expect(refused.json, JSON.stringify(params)).toMatchObject({ id: 6, error: { code: -32602 } });
      expect(badRequest(refused.json)).toEqual([field]);
      expect((refused.json.error as { message: string }).message).toContain(`${field}: ${description}`);
    }
    const listed = await list({
      statusTimestampAfter: "2026-01-31T09:00:00Z",
      pageSize: 10,
      historyLength: 0,
    });
    expect(listed.json).toMatchObject({ id: 6, result: { tasks: [] } });

    const noId = await rawCall(
      bed,
      "helper",
      { jsonrpc: "2.0", id: 4, method: "GetTask", params: { id: " " } },
      apiKey,
    );
    expect(badRequest(noId.json)).toEqual(["params.id"]);

    const missing = await rawCall(
      bed,
      "helper",
      { jsonrpc: "2.0", id: 5, method: "GetTask", params: { id: "no-such-task" } },
      apiKey,
    );
    expect(missing.json.error).toMatchObject({ code: -32001, message: "Task not found: no-such-task" });

    const notJson = await rawCall(bed, "helper", "{not json", apiKey);
    expect(notJson.json.error).toMatchObject({ code: -32700 });
  });

  it("refuses callers without an API key, unpublished agents, and push URLs into the gateway's network by default", async () => {
    await bed.register("helper", ["a2a"]);
    await bed.register("hidden", []);
    const { apiKey } = await bed.register("alice-client", []);
    const call = { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } };
    const anonymous = await rawCall(bed, "helper", call);
    expect(anonymous.status).toBe(401);
    expect(JSON.stringify(anonymous.json)).toContain("send an API key");
    const hidden = await rawCall(bed, "hidden", call, apiKey);
    expect(hidden.status).toBe(404);

    const strict = await startTestGateway({ extensions: [a2aInboundExtension()] });
    try {
      await strict.register("helper", "p-helper", { capabilities: ["a2a"] });
      const client = await strict.register("alice-client");
      const res = await fetch(`${strict.url}/a2a/helper`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": client.apiKey },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 7,
          method: "SendMessage",
          params: {
            message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] },
            configuration: { taskPushNotificationConfig: { url: "http://169.254.169.254/latest" } },
          },
        }),
      });
      const json = (await res.json()) as Record<string, unknown>;
      expect(json.error).toMatchObject({ code: -32602 });
      expect(badRequest(json)).toEqual(["params.configuration.taskPushNotificationConfig.url"]);
    } finally {
      await strict.close();
    }
  });

  it("serves A2A 0.3 clients (message/send, tasks/get) through the SDK's compatibility layer", async () => {
    const test = await bed.register("helper", ["a2a"]);
    const agent = await bed.connect(test, "helper");
    agent.onRequest((body) => ({ text: `v03: ${String(body.text)}` }));
    const { apiKey } = await bed.register("alice-client", []);
    const sent = await rawCall(
      bed,
      "helper",
      {
        jsonrpc: "2.0",
        id: "a",
        method: "message/send",
        params: {
          message: { kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "old" }] },
        },
      },
      apiKey,
    );
    const task = sent.json.result as {
      id: string;
      kind: string;
      status: { state: string };
      artifacts: unknown[];
    };
    expect(task).toMatchObject({ kind: "task", status: { state: "completed" } });
    expect(JSON.stringify(task.artifacts)).toContain("v03: old");
    const bad = await rawCall(
      bed,
      "helper",
      {
        jsonrpc: "2.0",
        id: "b",
        method: "message/send",
        params: { message: { messageId: "m2", role: "user", parts: [{}] } },
      },
      apiKey,
    );
    expect(badRequest(bad.json)).toEqual(["params.message.parts[0].kind"]);
  });
});

/** A webhook on 127.0.0.1 recording each push: its token header, Authorization header and body. */
async function pushReceiver(bed: A2ABed) {
  const pushes: {
    auth: string | undefined;
    authorization: string | undefined;
    body: Record<string, unknown>;
  }[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      pushes.push({
        auth: req.headers["x-a2a-notification-token"] as string | undefined,
        authorization: req.headers.authorization,
        body: JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>,
      });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  bed.cleanup(() => new Promise((resolve) => receiver.close(resolve)));
  return { pushes, pushUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` };
}

describe("A2A bridge: push notification credentials", () => {
  const bed = useA2AGateway();

  it("sends Authorization when the config has authentication, and then not the token", async () => {
    const test = await bed.register("helper", ["a2a"]);
    const agent = await bed.connect(test, "helper");
    agent.onRequest((body) => ({ text: `got: ${String(body.text)}` }));
    const { apiKey } = await bed.register("alice-client", []);
    const { pushes, pushUrl } = await pushReceiver(bed);
    const client = await bed.client("helper", apiKey);
    const request = sendRequest("hello", true);
    (request.configuration as { taskPushNotificationConfig: unknown }).taskPushNotificationConfig = {
      tenant: "",
      id: "hook-2",
      taskId: "",
      url: pushUrl,
      token: PUSH_TOKEN,
      authentication: { scheme: "Bearer", credentials: "hook-credentials" },
    };
    await client.sendMessage(request);
    await until(
      () => pushes.map((p) => JSON.stringify(p.body)),
      (bodies) => bodies.some((b) => b.includes("TASK_STATE_COMPLETED")),
      "a push with the completed status",
    );
    expect(pushes.every((p) => p.authorization === "Bearer hook-credentials" && p.auth === undefined)).toBe(
      true,
    );
  });
});

describe("A2A bridge: an ACP agent that is offline", () => {
  const bed = useA2AGateway();

  it("leaves the task SUBMITTED with a clear message, then completes it and pushes when the agent connects", async () => {
    const test = await bed.register("helper", ["a2a"]);
    const { apiKey } = await bed.register("alice-client", []);
    const { pushes, pushUrl } = await pushReceiver(bed);

    const client = await bed.client("helper", apiKey);
    const queued = (await client.sendMessage(sendRequest("while you were away"))) as Task;
    expect(queued.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const said = queued.status?.message?.parts[0]?.content;
    expect(said?.$case === "text" && said.value).toContain("helper is offline");
    const config = await client.createTaskPushNotificationConfig({
      tenant: "",
      id: "hook-1",
      taskId: queued.id,
      url: pushUrl,
      token: PUSH_TOKEN,
      authentication: undefined,
    });
    expect(config.url).toBe(pushUrl);
    const stored = await client.getTaskPushNotificationConfig({
      tenant: "",
      taskId: queued.id,
      id: "hook-1",
    });
    expect(stored).toMatchObject({ url: pushUrl, token: PUSH_TOKEN });

    // The agent comes online: the queued request reaches it, and its answer completes the task.
    const agent = await bed.connect(test, "helper");
    agent.onRequest((body) => ({ text: `back: ${String(body.text)}` }));
    const done = await until(
      () => client.getTask({ tenant: "", id: queued.id }),
      (task) => task.status?.state === TaskState.TASK_STATE_COMPLETED,
      "the queued task completes",
    );
    const answer = done.artifacts[0]?.parts[0]?.content;
    expect(answer?.$case === "text" && answer.value).toBe("back: while you were away");
    await until(
      () => pushes.map((p) => JSON.stringify(p.body)),
      (bodies) => bodies.some((b) => b.includes("TASK_STATE_COMPLETED")),
      "a push with the completed status",
    );
    expect(pushes.every((p) => p.auth === PUSH_TOKEN)).toBe(true);
    // The webhook got its token; the gateway's files hold it only sealed.
    expect(filesContaining(bed.dir, PUSH_TOKEN)).toEqual([]);
  });
});
