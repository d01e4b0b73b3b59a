import { randomBytes } from "node:crypto";
/**
 * A2A task records outlive the gateway: tasks, push configs and late answers across a real restart
 * (embedded broker, same data dir), and across two gateways on one NATS, with the unmodified SDK client.
 */
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { ListTasksRequest, type Task, TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { describe, expect, it } from "vitest";
import { openBroker } from "../../../src/broker/index.js";
import type { AcpAgent } from "../../../src/client/index.js";
import {
  PUSH_BUCKET,
  type StoredTask,
  sweepTasks,
  TASK_BUCKET,
  TASK_RETENTION_MS,
} from "../../../src/extensions/a2a/inbound/durable-stores.js";
import { a2aInboundExtension } from "../../../src/extensions/a2a/inbound/extension.js";
import { secretKeeper } from "../../../src/extensions/custody/sealing.js";
import { agentFor } from "../../client/fixtures.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../../helpers/nats.js";
import { freePort } from "../../helpers/ports.js";
import { useTmpDir } from "../../helpers/tmp.js";
import { until } from "../../helpers/until.js";
import { sendRequest } from "./inbound-bed.js";

const tmp = useTmpDir("acp-a2a-durable-");

/** A push receiver on loopback; `bodies` are the raw JSON bodies received. */
async function pushReceiver(): Promise<{ url: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks).toString());
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    bodies,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The unmodified SDK client for helper's card at `gw`, sending `apiKey` on every call. */
function client(gw: TestGateway, apiKey: string): Promise<Client> {
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ "x-api-key": apiKey }),
    shouldRetryWithHeaders: async () => undefined,
  });
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
    }),
  );
  return factory.createFromUrl(`${gw.url}/a2a/helper/`);
}

/**
 * Resolves once `gw` reads `agentId` as offline. A socket's close resolves on the client before the
 * gateway has counted the connection gone; a request sent before then finds the agent online.
 */
async function offlineAt(gw: TestGateway, agentId: string): Promise<void> {
  await until(
    () => gw.gateway.context.presence.get(agentId),
    (presence) => presence.state === "offline",
    `${agentId} reads offline at the gateway`,
  );
}

const stateOf = (task: Task) => TaskState[task.status?.state ?? 0];
const textOf = (task: Task) => {
  const content = task.artifacts[0]?.parts[0]?.content;
  return content?.$case === "text" ? content.value : undefined;
};

describe("A2A task records across a gateway restart (embedded broker)", () => {
  it("keeps tasks and push configs, cancels and completes tasks from before the restart", async () => {
    const dir = tmp();
    const data = join(dir, "data");
    const port = await freePort();
    const start = () =>
      startTestGateway({
        dataDir: data,
        port,
        allowPrivateUrls: true,
        extensions: [a2aInboundExtension({ dataDir: data, secrets: secretKeeper({ data }) })],
      });
    let gw = await start();
    const receiver = await pushReceiver();
    let agent: AcpAgent | undefined;
    try {
      const helper: TestAgent = await gw.register("helper", "p-helper", { capabilities: ["a2a"] });
      const caller = await gw.register("alice-client", "p-alice");
      const other = await gw.register("bob-client", "p-bob");
      let alice = await client(gw, caller.apiKey);
      // One exchange while helper is online (the bridge's handshake with it), then helper goes away:
      // the next two requests are accepted and wait in its queue.
      const first = agentFor(gw, helper, join(dir, "helper"));
      first.onRequest((body) => ({ text: `early: ${String(body.text)}` }));
      await first.connect();
      expect(stateOf((await alice.sendMessage(sendRequest("hello"))) as Task)).toBe("TASK_STATE_COMPLETED");
      await first.close();
      await offlineAt(gw, "helper");
      const queued = (await alice.sendMessage(sendRequest("before the restart"))) as Task;
      const doomed = (await alice.sendMessage(sendRequest("cancel me later"))) as Task;
      expect([stateOf(queued), stateOf(doomed)]).toEqual(["TASK_STATE_SUBMITTED", "TASK_STATE_SUBMITTED"]);
      await alice.createTaskPushNotificationConfig({
        tenant: "",
        id: "hook-1",
        taskId: queued.id,
        url: receiver.url,
        token: "push-token",
        authentication: undefined,
      });

      await gw.gateway.close();
      gw = await start();
      alice = await client(gw, caller.apiKey);

      const again = await alice.getTask({ tenant: "", id: queued.id, historyLength: undefined });
      expect(stateOf(again)).toBe("TASK_STATE_SUBMITTED");
      expect(again.history[0]?.parts[0]?.content).toEqual({ $case: "text", value: "before the restart" });
      const listed = await alice.listTasks(ListTasksRequest.fromJSON({}));
      expect(listed.tasks.map((t) => t.id)).toEqual(expect.arrayContaining([queued.id, doomed.id]));
      expect(listed.tasks).toHaveLength(3);
      expect(
        await alice.getTaskPushNotificationConfig({ tenant: "", taskId: queued.id, id: "hook-1" }),
      ).toMatchObject({ url: receiver.url, token: "push-token" });
      // Still scoped to its owner.
      const bob = await client(gw, other.apiKey);
      await expect(bob.getTask({ tenant: "", id: queued.id, historyLength: undefined })).rejects.toThrow(
        /not found/i,
      );
      // A subscription to a task from before the restart: its current state, then the end.
      const seen: string[] = [];
      for await (const event of alice.resubscribeTask({ tenant: "", id: queued.id }))
        seen.push(event.payload?.$case ?? "?");
      expect(seen).toEqual(["task"]);

      const canceled = await alice.cancelTask({ tenant: "", id: doomed.id, metadata: undefined });
      expect(stateOf(canceled)).toBe("TASK_STATE_CANCELED");

      // helper connects: it answers both queued requests and hears of the cancel.
      agent = agentFor(gw, helper, join(dir, "helper"));
      const cancels: unknown[] = [];
      agent.onNotification((body, context) => {
        if (context.method === "agent.a2a.cancel") cancels.push(body.taskId);
      });
      agent.onRequest((body) => ({ text: `late: ${String(body.text)}` }));
      await agent.connect();
      const done = await until(
        () => alice.getTask({ tenant: "", id: queued.id, historyLength: undefined }),
        (task) => task.status?.state === TaskState.TASK_STATE_COMPLETED,
        "the task from before the restart completes",
      );
      expect(textOf(done)).toBe("late: before the restart");
      await until(
        () => receiver.bodies,
        (bodies) => bodies.some((b) => b.includes("TASK_STATE_COMPLETED")),
        "a push of the completion",
      );
      await until(
        () => cancels,
        (c) => c.includes(doomed.id),
        "helper told of the cancel",
      );
      // Its answer to the canceled task came too, and changed nothing.
      const still = await alice.getTask({ tenant: "", id: doomed.id, historyLength: undefined });
      expect(stateOf(still)).toBe("TASK_STATE_CANCELED");
      expect(still.artifacts).toEqual([]);
    } finally {
      await agent?.close();
      await gw.close();
      await receiver.close();
    }
  });
});

describe("A2A task records: a request not sent before the restart", () => {
  it("fails the task with a clear message when the handshake had not completed", async () => {
    const dir = tmp();
    const data = join(dir, "data");
    const port = await freePort();
    const start = () =>
      startTestGateway({
        dataDir: data,
        port,
        extensions: [a2aInboundExtension({ dataDir: data, secrets: secretKeeper({ data }) })],
      });
    let gw = await start();
    try {
      await gw.register("helper", "p-helper", { capabilities: ["a2a"] });
      const caller = await gw.register("alice-client", "p-alice");
      // helper has never been online: only the bridge's handshake is queued, not the request.
      const queued = (await (await client(gw, caller.apiKey)).sendMessage(sendRequest("lost?"))) as Task;
      expect(stateOf(queued)).toBe("TASK_STATE_SUBMITTED");
      await gw.gateway.close();
      gw = await start();
      const alice = await client(gw, caller.apiKey);
      const failed = await until(
        () => alice.getTask({ tenant: "", id: queued.id, historyLength: undefined }),
        (task) => task.status?.state === TaskState.TASK_STATE_FAILED,
        "the task fails",
      );
      const said = failed.status?.message?.parts[0]?.content;
      expect(said?.$case === "text" && said.value).toMatch(
        /restarted before helper answered the bridge's handshake, so the request was never sent/,
      );
    } finally {
      await gw.close();
    }
  });
});

describe("A2A task records: retention", () => {
  it("forgets finished tasks (and their push configs) past the retention, keeps the others", async () => {
    const broker = await openBroker({ data: join(tmp(), "data") });
    try {
      const tasks = broker.kv<StoredTask>(TASK_BUCKET);
      const pushes = broker.kv<unknown>(PUSH_BUCKET);
      const record = (state: string, savedAt: string): StoredTask => ({
        agentId: "helper",
        tenant: "",
        owner: "alice",
        origin: "x",
        task: { id: "t", contextId: "c", status: { state }, artifacts: [], history: [] },
        savedAt,
      });
      const old = new Date(Date.now() - TASK_RETENTION_MS - 60_000).toISOString();
      await tasks.put("old-done", record("TASK_STATE_COMPLETED", old));
      await pushes.put("old-done/_hook", { config: {}, wireVersion: "1.0" });
      await tasks.put("old-waiting", record("TASK_STATE_SUBMITTED", old));
      await tasks.put("new-done", record("TASK_STATE_FAILED", new Date().toISOString()));
      const unfinished = await sweepTasks(broker, new Date(Date.now() - TASK_RETENTION_MS));
      expect(unfinished.map((t) => (t.task as { status: { state: string } }).status.state)).toEqual([
        "TASK_STATE_SUBMITTED",
      ]);
      expect(await tasks.keys()).toEqual(["new-done", "old-waiting"]);
      expect(await pushes.keys()).toEqual([]);
    } finally {
      await broker.close();
    }
  });
});

describeWithNats("A2A task records on NATS JetStream", () => {
  const startNats = useNatsServer();

  it("a second gateway sees the tasks; a restarted first gateway completes its task", async () => {
    const dir = tmp();
    const nats = await startNats();
    const port = await freePort();
    // Secrets sealed by one gateway of a cluster open at any other: one custody key for both.
    const sharedKey = randomBytes(32).toString("base64url");
    const startOne = () =>
      startTestGateway({
        natsUrl: nats.url,
        dataDir: join(dir, "one"),
        custody: { key: sharedKey },
        port,
        extensions: [
          a2aInboundExtension({
            dataDir: join(dir, "one"),
            secrets: secretKeeper({ data: join(dir, "one"), key: sharedKey }),
          }),
        ],
      });
    let one = await startOne();
    const two = await startTestGateway({
      natsUrl: nats.url,
      dataDir: join(dir, "two"),
      custody: { key: sharedKey },
      extensions: [
        a2aInboundExtension({
          dataDir: join(dir, "two"),
          secrets: secretKeeper({ data: join(dir, "two"), key: sharedKey }),
        }),
      ],
    });
    let agent: AcpAgent | undefined;
    try {
      const helper = await one.register("helper", "p-helper", { capabilities: ["a2a"] });
      const caller = await one.register("alice-client", "p-alice");
      const first = agentFor(one, helper, join(dir, "helper"));
      first.onRequest(() => ({ text: "early" }));
      await first.connect();
      const hello = (await (await client(one, caller.apiKey)).sendMessage(sendRequest("hello"))) as Task;
      expect(stateOf(hello)).toBe("TASK_STATE_COMPLETED");
      await first.close();
      await offlineAt(one, "helper");
      const queued = (await (await client(one, caller.apiKey)).sendMessage(sendRequest("via one"))) as Task;
      const doomed = (await (await client(one, caller.apiKey)).sendMessage(sendRequest("drop it"))) as Task;
      const viaTwo = await client(two, caller.apiKey);
      expect(stateOf(await viaTwo.getTask({ tenant: "", id: queued.id, historyLength: undefined }))).toBe(
        "TASK_STATE_SUBMITTED",
      );
      expect(stateOf(await viaTwo.cancelTask({ tenant: "", id: doomed.id, metadata: undefined }))).toBe(
        "TASK_STATE_CANCELED",
      );

      await one.gateway.close();
      one = await startOne();
      // The first A2A request after the restart lets the bridge pick up its earlier tasks.
      const viaOne = await client(one, caller.apiKey);
      expect(stateOf(await viaOne.getTask({ tenant: "", id: queued.id, historyLength: undefined }))).toBe(
        "TASK_STATE_SUBMITTED",
      );
      agent = agentFor(one, helper, join(dir, "helper"));
      agent.onRequest((body) => ({ text: `nats: ${String(body.text)}` }));
      await agent.connect();
      const done = await until(
        () => viaTwo.getTask({ tenant: "", id: queued.id, historyLength: undefined }),
        (task) => task.status?.state === TaskState.TASK_STATE_COMPLETED,
        "the task completes, seen through the second gateway",
      );
      expect(textOf(done)).toBe("nats: via one");
      expect(stateOf(await viaOne.getTask({ tenant: "", id: doomed.id, historyLength: undefined }))).toBe(
        "TASK_STATE_CANCELED",
      );
    } finally {
      await agent?.close();
      await two.close();
      await one.close();
    }
  });
});
