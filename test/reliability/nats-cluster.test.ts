/**
 * The "many machines" deployment (docs/deploy.md): a 3-node NATS JetStream cluster, streams and
 * buckets with 3 replicas, three gateways behind a load balancer. The node leading the inbox
 * stream is killed mid-stream: the stream elects another leader and keeps serving, nothing
 * acknowledged is lost or duplicated.
 */
import { afterEach, expect, it } from "vitest";
import { describeWithNats } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveryFigures, recordFigures } from "./support/figures.js";
import { type NatsCluster, natsGatewayOptions, startNatsCluster } from "./support/nats-cluster.js";
import { type GatewayChild, spawnGateway } from "./support/processes.js";
import { type FailoverProxy, startFailoverProxy } from "./support/proxy.js";
import { type CountingRecipient, pairAgents, settledGatewayView } from "./support/recipient.js";
import { MessageStream } from "./support/stream.js";

/** Replicated writes cost more again than single-node NATS: a smaller stream keeps CI bounded. */
const MESSAGES = Number(process.env.ACP_RELIABILITY_CLUSTER_MESSAGES ?? 2_000);

describeWithNats("3-node NATS cluster, replicas 3", () => {
  const tmp = useTmpDir("acp-rel-cluster-");
  let cluster: NatsCluster | undefined;
  const gateways: GatewayChild[] = [];
  let proxy: FailoverProxy | undefined;
  let recipient: CountingRecipient | undefined;
  afterEach(async () => {
    await recipient?.close();
    await proxy?.close();
    for (const gateway of gateways.splice(0)) await gateway.kill();
    await cluster?.dispose();
  });

  it("loses nothing and keeps serving when the stream leader's node is killed", async () => {
    cluster = await startNatsCluster(3);
    const urls = cluster.urls;
    for (let i = 0; i < 3; i++) {
      // Each gateway prefers a different node; all three know the whole cluster.
      const servers = [...urls.slice(i), ...urls.slice(0, i)];
      gateways.push(await spawnGateway({ launch: natsGatewayOptions(servers, tmp(), 3) }));
    }
    proxy = await startFailoverProxy(gateways.map((g) => g.port));
    const pair = await pairAgents(proxy.url, { sender: "agent-sender", recipient: "agent-recipient" });
    recipient = pair.recipient;

    const stream = new MessageStream({
      urls: [proxy.url],
      from: pair.sender,
      to: "agent-recipient",
      count: MESSAGES,
      concurrency: 32,
      deadlineMs: 150_000,
    });
    const running = stream.run();
    await stream.acknowledgedAtLeast(MESSAGES * 0.3);
    // The node killed is the stream's leader, as the nodes' monitoring reports it: never a guess.
    const leader = await cluster.streamLeader("ACP_INBOX");
    const victim = cluster.nodes.find((node) => node.name === leader);
    if (!victim) throw new Error(`no node is the ACP_INBOX stream's leader (monitoring said ${leader})`);
    expect(victim.name).toBe(leader);
    const acknowledgedAtKill = stream.acknowledged.size;
    const faultAt = Date.now();
    await victim.kill();
    await running;
    const acknowledgedAfterKill = stream.acknowledged.size - acknowledgedAtKill;
    const newLeader = await cluster.streamLeader("ACP_INBOX");
    const missing = await recipient.waitFor(stream.acknowledged, 90_000);
    const view = await settledGatewayView(proxy.url, pair.recipientAgent, faultAt);
    // Anything redelivered has reached the application by then.
    await recipient.handledAfterSettled(proxy.url, pair.sender);
    const figures = deliveryFigures(stream.sent, stream.acknowledged, recipient.deliveries);
    recordFigures("nats-cluster-node-killed", {
      ...figures,
      killedNode: victim.name,
      newStreamLeader: newLeader ?? "none",
      acknowledgedAtKill,
      acknowledgedAfterKill,
      resubmittedAnsweredDuplicate: stream.duplicatesReported,
      redeliveredByGateway: view.redelivered,
      unsettledAtEnd: view.unsettled,
      longestPauseMs: stream.longestPauseAfter(faultAt),
      acknowledgedPerSecond: stream.ratePerSecond,
      answers: stream.describeAnswers(),
    });

    expect(stream.refusals).toEqual(new Map());
    expect(figures.acknowledged).toBe(MESSAGES);
    expect(missing).toBe(0);
    expect(figures.lost).toBe(0);
    expect(figures.duplicated).toBe(0);
    expect(view.unsettledItems).toEqual([]);
    // The stream kept serving: most of it was accepted after the node died, under a new leader.
    expect(acknowledgedAfterKill).toBeGreaterThan(0);
    expect(newLeader).toBeDefined();
    expect(newLeader).not.toBe(victim.name);
  }, 280_000);
});
