import { join } from "node:path";
import { expect, it } from "vitest";
import { a2aOutboundExtension } from "../../../../src/extensions/a2a/outbound/extension.js";
import { secretKeeper } from "../../../../src/extensions/custody/sealing.js";
import { agentFor } from "../../../client/fixtures.js";
import { ADMIN_TOKEN, api, startTestGateway } from "../../../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../../../helpers/nats.js";
import { useTmpDir } from "../../../helpers/tmp.js";
import { startA2AServer } from "./a2a-server.js";

describeWithNats("A2A out on NATS JetStream", () => {
  const nats = useNatsServer();
  const tmp = useTmpDir("acp-a2a-out-nats-");

  it("a registration made at one gateway is served by it, and the other gateway's agents reach it", async () => {
    const server = await nats();
    const dir = tmp();
    const a2a = await startA2AServer({ behaviour: "echo-task", streaming: true });
    // One after the other, as the other multi-gateway NATS tests do: started together on a fresh
    // server under a loaded CI run, one gateway's first KV read timed out (not yet understood).
    const startOne = (name: string) =>
      startTestGateway({
        natsUrl: server.url,
        allowPrivateUrls: true,
        dataDir: join(dir, name),
        extensions: [
          a2aOutboundExtension({
            keyDir: join(dir, name, "a2a-bridge"),
            secrets: secretKeeper({ data: join(dir, name) }),
          }),
        ],
      });
    const one = await startOne("one");
    const two = await startOne("two");
    const gateways = [one, two];
    try {
      const added = await api(one.url, "/api/v1/a2a/remote-agents", {
        body: { url: a2a.url, agent_id: "echo" },
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(added.status).toBe(201);
      // Listed at both gateways: the records live in the shared KV.
      const listed = await api(two.url, "/api/v1/a2a/remote-agents", {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect((listed.json.agents as { agent_id: string }[]).map((a) => a.agent_id)).toEqual(["echo"]);
      const alice = agentFor(two, await two.register("alice"), join(dir, "alice"));
      await alice.connect();
      try {
        expect(await alice.request("echo", { text: "across gateways" })).toMatchObject({
          text: "done: across gateways\nupper: ACROSS GATEWAYS",
          a2a: { state: "completed" },
        });
      } finally {
        await alice.close();
      }
    } finally {
      await Promise.all(gateways.map((g) => g.close()));
      await a2a.close();
    }
  });
});
