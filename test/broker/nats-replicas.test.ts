import { afterEach, expect, it } from "vitest";
import { type Broker, openBroker } from "../../src/broker/index.js";
import { describeWithNats } from "../helpers/nats.js";
import { type NatsCluster, startNatsCluster } from "../reliability/support/nats-cluster.js";
import { message } from "./support.js";

/**
 * Buckets and streams with 3 replicas on a 3-node cluster, two brokers standing for two gateways,
 * each connected to a different node: what one writes, the other reads at once (a follower's
 * direct get could answer with what it had before).
 */
describeWithNats("NATS broker with 3 replicas", () => {
  let cluster: NatsCluster | undefined;
  const brokers: Broker[] = [];
  afterEach(async () => {
    for (const broker of brokers.splice(0)) await broker.close();
    await cluster?.dispose();
  });

  it("reads its own and the other gateway's writes at once: KV entries and stored envelopes", async () => {
    cluster = await startNatsCluster(3);
    const [one, , three] = cluster.urls as [string, string, string];
    const writer = await openBroker({ nats: { servers: [one], replicas: 3 } });
    brokers.push(writer);
    const reader = await openBroker({ nats: { servers: [three], replicas: 3 } });
    brokers.push(reader);
    const kvHere = writer.kv<{ n: number }>("pairs");
    const kvThere = reader.kv<{ n: number }>("pairs");
    for (let n = 0; n < 100; n++) {
      await kvHere.put("alice.bob", { n });
      expect((await kvThere.get("alice.bob"))?.value).toEqual({ n });
    }
    for (let n = 0; n < 50; n++) {
      const input = message("alice", "bob", { kind: "request", method: "agent.request" });
      await writer.submit(input);
      const stored = await reader.get(input);
      expect(stored?.envelope).toBe(input.envelope);
    }
  }, 120_000);
});
