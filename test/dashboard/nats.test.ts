import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import type { FeedItem } from "../../src/extensions/dashboard/index.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { dashboard, eventually, followStream, principalToken } from "../helpers/dashboard.js";

describeWithNats("the dashboard with several gateways on one NATS", () => {
  const nats = useNatsServer();
  // Registered first, so the directory is removed after the gateways using it have closed.
  const tmp = useTmpDir("acp-dash-nats-");
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it("shows (and posts to chat) what another gateway relayed, live and in the feed", async () => {
    const server = await nats();
    const dir = tmp();
    const posted: string[] = [];
    const { createServer } = await import("node:http");
    const receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on("end", () => {
        posted.push(...String((JSON.parse(body) as { text: string }).text).split("\n"));
        res.end("ok");
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise((resolve) => receiver.close(resolve)));
    const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;

    const start = (name: string, extra = {}): Promise<TestGateway> =>
      startTestGateway({ natsUrl: server.url, dataDir: join(dir, name), ...extra });
    const relaying = await start("a");
    cleanups.push(() => relaying.close());
    const watching = await start("b", {
      summaryWebhooks: [hook],
      allowPrivateUrls: true, // the receiver listens on loopback
      dashboard: { webhookOptions: { batchMs: 20, minIntervalMs: 0 } },
    });
    cleanups.push(() => watching.close());

    const token = await principalToken(watching, "alice");
    const stream = await followStream(watching, token);
    await stream.next("ready");

    const connect = async (who: TestAgent) => {
      const agent = new AcpAgent({
        gateway: relaying.url,
        identity: who.identity,
        apiKey: who.apiKey,
        audit: { root: join(dir, "audit") },
        state: { root: join(dir, "state") },
        requestTimeoutMs: 10_000,
      });
      agent.on("error", () => undefined);
      agent.onRequest("agent.request", () => ({ ok: true }));
      await agent.connect();
      cleanups.push(() => agent.close());
      return agent;
    };
    const alice = await connect(await relaying.register("alice-scheduler", "alice"));
    await connect(await relaying.register("bob-scheduler", "bob"));
    await alice.request("bob-scheduler", { action: "get-availability" });

    const response = (await stream.next("summary", (d) => (d as FeedItem).type === "response")) as FeedItem;
    expect(response.from.agent).toBe("bob-scheduler");
    await eventually(async () => {
      const { items } = (await dashboard(watching, token, "/feed")).json as { items: FeedItem[] };
      return items.length === 6;
    }, "the watching gateway's feed lists the six messages the other one relayed");
    await eventually(() => posted.length === 6, "the watching gateway posted the six summaries");
    stream.close();
  });
});
