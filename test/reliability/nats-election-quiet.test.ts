/**
 * What an application sees of a NATS stream-leader election: SDK agents on both ends (a sender
 * streaming notifications, a recipient handling them more slowly, so a backlog is being
 * acknowledged when it happens) through a gateway on a 3-node cluster with R3 streams, and the node
 * leading the message-status stream killed mid-stream. The SDK works around every refused write and
 * acknowledgement: each agent reports at most one `degraded`, followed by its `recovered`, and no
 * `error`; nothing is lost or handled twice.
 */
import { afterEach, expect, it } from "vitest";
import { AcpAgent, type DegradedInfo, type RecoveredInfo } from "../../src/client/index.js";
import { registerTestAgent } from "../helpers/gateway.js";
import { describeWithNats } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { recordFigures } from "./support/figures.js";
import { type NatsCluster, natsGatewayOptions, startNatsCluster } from "./support/nats-cluster.js";
import { type GatewayChild, spawnGateway } from "./support/processes.js";

/** The stream behind the `acp_message_status` KV bucket (src/broker/nats/layout.ts). */
const STATUS_STREAM = "KV_acp_message_status";
const MESSAGES = Number(process.env.ACP_RELIABILITY_ELECTION_MESSAGES ?? 600);

/** What one agent told its application. */
class Told {
  readonly errors: string[] = [];
  readonly degraded: DegradedInfo[] = [];
  readonly recovered: RecoveredInfo[] = [];
  readonly recoveredAt: number[] = [];

  /** When each degraded/recovered came, in ms after `start`: "+1200..+9800". */
  timeline(start: number): string {
    return this.degraded
      .map((d, i) => `+${Date.parse(d.since) - start}..+${(this.recoveredAt[i] ?? Number.NaN) - start}`)
      .join(" ");
  }
  resubmits = 0;

  constructor(agent: AcpAgent) {
    agent.on("error", (err) => this.errors.push(err.message));
    agent.on("degraded", (info) => this.degraded.push(info));
    agent.on("recovered", (info) => {
      this.recovered.push(info);
      this.recoveredAt.push(Date.now());
    });
    agent.on("resubmit", () => this.resubmits++);
  }
}

describeWithNats("a NATS stream-leader election, as SDK agents see it", () => {
  const tmp = useTmpDir("acp-rel-election-");
  let cluster: NatsCluster | undefined;
  let gateway: GatewayChild | undefined;
  let sender: AcpAgent | undefined;
  let recipient: AcpAgent | undefined;
  afterEach(async () => {
    await sender?.close();
    await recipient?.close();
    await gateway?.kill();
    await cluster?.dispose();
  });

  it("one degraded/recovered pair per agent at most, no error, nothing lost or duplicated", async () => {
    cluster = await startNatsCluster(3);
    gateway = await spawnGateway({ launch: natsGatewayOptions(cluster.urls, tmp(), 3) });
    const [from, to] = await Promise.all([
      registerTestAgent(gateway.url, "agent-sender", "principal-of-sender"),
      registerTestAgent(gateway.url, "agent-recipient", "principal-of-recipient"),
    ]);
    const agentOf = (who: typeof from, extra: Partial<ConstructorParameters<typeof AcpAgent>[0]> = {}) =>
      new AcpAgent({
        gateway: gateway!.url,
        identity: who.identity,
        apiKey: who.apiKey,
        audit: false,
        state: false,
        reconnect: { initialDelayMs: 100, maxDelayMs: 1_000 },
        requestTimeoutMs: 120_000,
        ...extra,
      });
    // About 150 notifications a second: slower than the sender, so there is always a backlog.
    recipient = agentOf(to, { flow: { concurrency: 4, prefetch: 16 } });
    const handled = new Map<number, number>();
    recipient.onNotification(async (body) => {
      await new Promise((resolve) => setTimeout(resolve, 25));
      const n = body.n as number;
      handled.set(n, (handled.get(n) ?? 0) + 1);
    });
    const toldRecipient = new Told(recipient);
    await recipient.connect();
    sender = agentOf(from);
    const toldSender = new Told(sender);
    await sender.connect();
    await sender.handshake("agent-recipient", { timeoutMs: 30_000 });

    let accepted = 0;
    let killed = false;
    let killedAt = 0;
    // The node leading the message-status bucket, which every submission and acknowledgement
    // writes (and, when it leads both, the inbox stream).
    const leader = await cluster.streamLeader(STATUS_STREAM);
    const victim = cluster.nodes.find((node) => node.name === leader) ?? cluster.nodes[0]!;
    const leadsInbox = (await cluster.streamLeader("ACP_INBOX")) === victim.name;
    const inFlight = new Set<Promise<void>>();
    for (let n = 0; n < MESSAGES; n++) {
      if (!killed && n === Math.floor(MESSAGES / 3)) {
        killed = true;
        killedAt = Date.now();
        await victim.kill();
      }
      const sent = sender
        .notify("agent-recipient", { n })
        .then(() => {
          accepted++;
        })
        .finally(() => inFlight.delete(sent));
      inFlight.add(sent);
      if (inFlight.size >= 16) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    await until(
      () => handled.size,
      (size) => size === MESSAGES,
      "the recipient handled every notification",
      120_000,
    ).catch(() => undefined);
    const missing = MESSAGES - handled.size;
    // Each agent that noticed the election has recovered from it (an idle one at its next
    // delivery: the redelivery of an acknowledgement the broker did not take, one ack wait later).
    await until(
      () => [toldSender, toldRecipient].every((told) => told.recovered.length === told.degraded.length),
      (done) => done,
      "every degraded agent recovered",
      60_000,
    );
    const duplicated = [...handled.values()].filter((count) => count > 1).length;
    recordFigures("nats-election-sdk-events", {
      messages: MESSAGES,
      accepted,
      missing,
      duplicated,
      killedNode: victim.name,
      killedNodeLedInbox: leadsInbox,
      newStatusLeader: (await cluster.streamLeader(STATUS_STREAM)) ?? "none",
      senderResubmits: toldSender.resubmits,
      senderDegraded: toldSender.degraded.length,
      senderFailuresWorkedAround: toldSender.recovered.reduce((sum, r) => sum + r.failures, 0),
      senderDegradedMs: toldSender.recovered.reduce((sum, r) => sum + r.degradedMs, 0),
      recipientDegraded: toldRecipient.degraded.length,
      recipientFailuresWorkedAround: toldRecipient.recovered.reduce((sum, r) => sum + r.failures, 0),
      senderTimeline: toldSender.timeline(killedAt),
      recipientTimeline: toldRecipient.timeline(killedAt),
      senderErrors: toldSender.errors.length,
      recipientErrors: toldRecipient.errors.length,
    });

    expect(accepted).toBe(MESSAGES);
    expect(missing).toBe(0);
    expect(duplicated).toBe(0);
    expect(toldSender.errors).toEqual([]);
    expect(toldRecipient.errors).toEqual([]);
    // The election was noticed (the sender's writes were refused while it ran), once.
    expect(toldSender.degraded).toHaveLength(1);
    expect(toldSender.recovered).toHaveLength(1);
    expect(toldRecipient.degraded.length).toBeLessThanOrEqual(1);
    expect(toldRecipient.recovered).toHaveLength(toldRecipient.degraded.length);
  }, 240_000);
});
