/**
 * `kill -9` of the gateway (embedded SQLite broker) in the middle of a 10,000-message stream, then a
 * restart on the same port and data directory: every message the gateway acknowledged (202) reaches
 * the application exactly once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveryFigures, recordFigures } from "./support/figures.js";
import { type GatewayChild, sleep, spawnGateway } from "./support/processes.js";
import { type CountingRecipient, pairAgents, settledGatewayView } from "./support/recipient.js";
import { MessageStream } from "./support/stream.js";

const MESSAGES = 10_000;

describe("kill -9 of the gateway mid-stream (embedded broker)", () => {
  const tmp = useTmpDir("acp-rel-kill-");
  const gateways: GatewayChild[] = [];
  let recipient: CountingRecipient | undefined;
  afterEach(async () => {
    await recipient?.close();
    for (const gateway of gateways.splice(0)) await gateway.kill();
  });

  it("delivers every acknowledged message exactly once after a restart", async () => {
    const data = tmp();
    const cli = ["--data", data, "--rate-limit", "1000000"];
    const first = await spawnGateway({ cli });
    gateways.push(first);
    const pair = await pairAgents(first.url, { sender: "agent-sender", recipient: "agent-recipient" });
    recipient = pair.recipient;

    const stream = new MessageStream({
      urls: [first.url],
      from: pair.sender,
      to: "agent-recipient",
      count: MESSAGES,
      concurrency: 32,
      deadlineMs: 150_000,
    });
    const running = stream.run();
    await stream.acknowledgedAtLeast(MESSAGES * 0.3);
    const acknowledgedAtKill = stream.acknowledged.size;
    const faultAt = Date.now();
    await first.kill();
    const deliveredAtKill = recipient.deliveries.size;
    // Down for a moment: the sender's submissions fail and are retried, the SDK keeps reconnecting.
    await sleep(1_000);
    const second = await spawnGateway({ cli, port: first.port });
    gateways.push(second);
    await running;

    const missing = await recipient.waitFor(stream.acknowledged, 60_000);
    const view = await settledGatewayView(second.url, pair.recipientAgent, faultAt);
    // Anything the restarted gateway redelivered has reached the application by then.
    await recipient.handledAfterSettled(second.url, pair.sender);
    const figures = deliveryFigures(stream.sent, stream.acknowledged, recipient.deliveries);
    recordFigures("kill-gateway-embedded", {
      ...figures,
      acknowledgedAtKill,
      deliveredAtKill,
      resubmittedAnsweredDuplicate: stream.duplicatesReported,
      redeliveredByGateway: view.redelivered,
      unsettledAtEnd: view.unsettled,
      sdkReconnects: recipient.reconnects,
      longestPauseMs: stream.longestPauseAfter(faultAt),
      acknowledgedPerSecond: stream.ratePerSecond,
      answers: stream.describeAnswers(),
    });

    expect(stream.refusals, "no message may be refused").toEqual(new Map());
    expect(figures.sent).toBe(MESSAGES);
    expect(figures.acknowledged).toBe(MESSAGES);
    expect(missing).toBe(0);
    expect(figures.lost).toBe(0);
    expect(figures.duplicated).toBe(0);
    expect(view.unsettledItems).toEqual([]);
    expect(recipient.reconnects).toBeGreaterThanOrEqual(1);
  }, 240_000);
});
