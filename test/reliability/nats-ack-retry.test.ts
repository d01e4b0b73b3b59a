/**
 * An acknowledgement sent while NATS refuses every write (nats-server's file size limit lowered to
 * one byte, as a full disk or a stream without a leader refuses them) is stored once NATS takes
 * writes again, by the gateway trying it again: the message is acknowledged long before its ack
 * wait would have redelivered it, and the handler ran once. (A stopped server would not do: the
 * write waiting in its socket lands when it wakes, retry or not.)
 */
import { afterEach, expect } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import { api, registerTestAgent, type TestAgent } from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { needing, setLimit } from "../helpers/process-limits.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { natsGatewayOptions } from "./support/nats-cluster.js";
import { type GatewayChild, sleep, spawnGateway } from "./support/processes.js";

/** Longer than the test: a redelivery cannot be what acknowledges the message. */
const ACK_WAIT_MS = 120_000;

describeWithNats("an acknowledgement during a NATS outage", () => {
  const startNats = useNatsServer();
  const tmp = useTmpDir("acp-rel-ack-retry-");
  let gateway: GatewayChild | undefined;
  const agents: AcpAgent[] = [];
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    await gateway?.kill();
  });

  needing("prlimit").it(
    "is stored once NATS takes writes again, without a redelivery",
    async () => {
      const nats = await startNats();
      gateway = await spawnGateway({
        launch: { ...natsGatewayOptions([nats.url], tmp()), delivery: { ackWaitMs: ACK_WAIT_MS } },
      });
      const url = gateway.url;
      const [from, to] = await Promise.all([
        registerTestAgent(url, "agent-sender", "principal-of-sender"),
        registerTestAgent(url, "agent-recipient", "principal-of-recipient"),
      ]);
      const agentOf = (who: TestAgent) => {
        const agent = new AcpAgent({
          gateway: url,
          identity: who.identity,
          apiKey: who.apiKey,
          audit: false,
          state: false,
          requestTimeoutMs: 60_000,
        });
        agents.push(agent);
        return agent;
      };
      const recipient = agentOf(to);
      const degraded: string[] = [];
      recipient.on("degraded", (info) => degraded.push(info.since));
      let handlerRuns = 0;
      let handlerStarted: () => void = () => undefined;
      const started = new Promise<void>((resolve) => {
        handlerStarted = resolve;
      });
      let finishHandler: () => void = () => undefined;
      const finish = new Promise<void>((resolve) => {
        finishHandler = resolve;
      });
      recipient.onNotification(async () => {
        handlerRuns++;
        handlerStarted();
        await finish;
      });
      await recipient.connect();
      const sender = agentOf(from);
      await sender.connect();
      await sender.handshake("agent-recipient", { timeoutMs: 30_000 });
      const { id: messageId } = await sender.notify("agent-recipient", { n: 1 });
      await started;

      // NATS refuses writes; the handler finishes and the SDK acknowledges: the store is refused.
      setLimit(nats.pid, "fsize", "1");
      try {
        finishHandler();
        await until(
          () => degraded.length,
          (n) => n > 0,
          "the gateway told the recipient its acknowledgement was not stored",
          30_000,
        );
        await sleep(500);
      } finally {
        setLimit(nats.pid, "fsize", "unlimited");
      }

      const status = await until(
        async () =>
          (await api(url, `/api/v1/messages/${messageId}/status?from=agent-sender`, { apiKey: to.apiKey }))
            .json as { status: string; retry_count: number },
        (s) => s.status === "acknowledged",
        "the message acknowledged once NATS took writes again",
        30_000,
      );
      expect(status.retry_count).toBe(0);
      expect(handlerRuns).toBe(1);
      const metrics = await scrapeMetrics(url);
      expect(metrics.get('acp_settle_retries_total{outcome="settled"}')).toBeGreaterThanOrEqual(1);
    },
    120_000,
  );
});
