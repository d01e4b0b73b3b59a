import { join } from "node:path";
import { type Task, TaskState } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { expect, it } from "vitest";
import { a2aInboundExtension } from "../../../src/extensions/a2a/inbound/extension.js";
import { secretKeeper } from "../../../src/extensions/custody/sealing.js";
import { agentFor } from "../../client/fixtures.js";
import { startTestGateway } from "../../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../../helpers/nats.js";
import { useTmpDir } from "../../helpers/tmp.js";
import { sendRequest } from "./inbound-bed.js";

const tmp = useTmpDir("acp-a2a-nats-");

describeWithNats("A2A bridge on NATS JetStream", () => {
  const startNats = useNatsServer();

  it("carries message/send and message/stream through in-process bridge agents on a NATS broker", async () => {
    const dir = tmp();
    const nats = await startNats();
    const data = join(dir, "data");
    const gw = await startTestGateway({
      natsUrl: nats.url,
      dataDir: data,
      extensions: [a2aInboundExtension({ dataDir: data, secrets: secretKeeper({ data }) })],
    });
    const helper = await gw.register("helper", "p-helper", { capabilities: ["a2a"] });
    const caller = await gw.register("alice-client", "p-alice");
    const agent = agentFor(gw, helper, join(dir, "helper"));
    agent.onRequest((body) => ({ text: `nats: ${String(body.text)}` }));
    try {
      await agent.connect();
      const client = await new ClientFactory().createFromUrl(`${gw.url}/a2a/helper/`);
      const auth = { serviceParameters: { authorization: `Bearer ${caller.apiKey}` } };
      const task = (await client.sendMessage(sendRequest("one"), auth)) as Task;
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(task.artifacts[0]?.parts[0]?.content).toEqual({ $case: "text", value: "nats: one" });
      const states: string[] = [];
      for await (const event of client.sendMessageStream(sendRequest("two"), auth)) {
        if (event.payload?.$case === "statusUpdate")
          states.push(TaskState[event.payload.value.status?.state ?? 0] ?? "?");
      }
      expect(states).toEqual(["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]);
    } finally {
      await agent.close();
      await gw.close();
    }
  });
});
