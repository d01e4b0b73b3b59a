/**
 * Faults on the NATS JetStream broker: a gateway killed while another serves the same NATS (the
 * agents reconnect to the survivor through the load balancer), and nats-server itself killed and
 * restarted on its file store. Both mid-stream; nothing acknowledged may be lost or duplicated.
 */
import { afterEach, expect, it } from "vitest";
import { registerTestAgent } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveryFigures, recordFigures } from "./support/figures.js";
import { natsGatewayOptions } from "./support/nats-cluster.js";
import { type GatewayChild, sleep, spawnGateway } from "./support/processes.js";
import { type FailoverProxy, startFailoverProxy } from "./support/proxy.js";
import { type CountingRecipient, gatewayIdOf, pairAgents, settledGatewayView } from "./support/recipient.js";
import { MessageStream } from "./support/stream.js";

/** Fewer than the embedded test's 10,000: NATS costs ~3× the CPU per message on this 2-core CI box. */
const MESSAGES = Number(process.env.ACP_RELIABILITY_NATS_MESSAGES ?? 3_000);

describeWithNats("NATS faults mid-stream", () => {
  const startNats = useNatsServer();
  const tmp = useTmpDir("acp-rel-nats-");
  const gateways: GatewayChild[] = [];
  let proxy: FailoverProxy | undefined;
  let recipient: CountingRecipient | undefined;
  afterEach(async () => {
    await recipient?.close();
    recipient = undefined;
    await proxy?.close();
    proxy = undefined;
    for (const gateway of gateways.splice(0)) await gateway.kill();
  });

  it("two gateways, one killed: the agents reconnect to the other and nothing is lost", async () => {
    const nats = await startNats();
    for (let i = 0; i < 2; i++) {
      gateways.push(await spawnGateway({ launch: natsGatewayOptions([nats.url], tmp()) }));
    }
    const [one, two] = gateways as [GatewayChild, GatewayChild];
    proxy = await startFailoverProxy([one.port, two.port]);
    const pair = await pairAgents(proxy.url, { sender: "agent-sender", recipient: "agent-recipient" });
    recipient = pair.recipient;
    // Kill the gateway the recipient is connected to, so it has to move.
    const probe = await registerTestAgent(one.url, "agent-probe", "principal-probe");
    const victim = (await gatewayIdOf(one.wsUrl, probe)) === recipient.gateway ? one : two;
    const survivor = victim === one ? two : one;

    const stream = new MessageStream({
      urls: [proxy.url],
      from: pair.sender,
      to: "agent-recipient",
      count: MESSAGES,
      concurrency: 32,
      deadlineMs: 120_000,
    });
    const running = stream.run();
    await stream.acknowledgedAtLeast(MESSAGES * 0.3);
    const acknowledgedAtKill = stream.acknowledged.size;
    const faultAt = Date.now();
    await victim.kill();
    await running;
    const missing = await recipient.waitFor(stream.acknowledged, 60_000);
    const view = await settledGatewayView(survivor.url, pair.recipientAgent, faultAt);
    // Anything redelivered has reached the application by then.
    await recipient.handledAfterSettled(survivor.url, pair.sender);
    const figures = deliveryFigures(stream.sent, stream.acknowledged, recipient.deliveries);
    recordFigures("nats-gateway-killed", {
      ...figures,
      acknowledgedAtKill,
      resubmittedAnsweredDuplicate: stream.duplicatesReported,
      redeliveredByGateway: view.redelivered,
      unsettledAtEnd: view.unsettled,
      sdkReconnects: recipient.reconnects,
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
    expect(recipient.reconnects).toBeGreaterThanOrEqual(1);
    expect(recipient.gateway).toBe(await gatewayIdOf(survivor.wsUrl, probe));
  }, 240_000);

  it("nats-server killed and restarted on its file store: nothing is lost", async () => {
    const nats = await startNats();
    const gateway = await spawnGateway({ launch: natsGatewayOptions([nats.url], tmp()) });
    gateways.push(gateway);
    const pair = await pairAgents(gateway.url, { sender: "agent-sender", recipient: "agent-recipient" });
    recipient = pair.recipient;

    const stream = new MessageStream({
      urls: [gateway.url],
      from: pair.sender,
      to: "agent-recipient",
      count: MESSAGES,
      concurrency: 32,
      deadlineMs: 120_000,
    });
    const running = stream.run();
    await stream.acknowledgedAtLeast(MESSAGES * 0.3);
    const acknowledgedAtKill = stream.acknowledged.size;
    const faultAt = Date.now();
    await nats.stop("SIGKILL");
    await sleep(1_000);
    await nats.restart();
    await running;
    const missing = await recipient.waitFor(stream.acknowledged, 60_000);
    const view = await settledGatewayView(gateway.url, pair.recipientAgent, faultAt);
    // Anything redelivered has reached the application by then.
    await recipient.handledAfterSettled(gateway.url, pair.sender);
    const figures = deliveryFigures(stream.sent, stream.acknowledged, recipient.deliveries);
    recordFigures("nats-server-restarted", {
      ...figures,
      acknowledgedAtKill,
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
  }, 240_000);
});
