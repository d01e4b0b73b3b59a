/**
 * The gateway's retries of acknowledgements the broker could not store (SettleRetries) are a queue
 * an agent fills: every `acknowledge` refused as unavailable joins it. Replayed here: while
 * nats-server is stopped (SIGSTOP: every request times out), an agent floods its socket with
 * 1,000 acknowledgements of messages that do not exist. Each is answered with an error frame; at
 * most 256 are kept to try again, and once NATS answers those end as refused (no such message):
 * nothing is acknowledged, nothing grows past the bound, and the gateway still serves.
 */
import { afterEach, expect, it } from "vitest";
import { ErrorCode } from "../../src/protocol/index.js";
import { FrameClient, registerTestAgent } from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { natsGatewayOptions } from "../reliability/support/nats-cluster.js";
import { type GatewayChild, spawnGateway } from "../reliability/support/processes.js";

const FLOOD = 1_000;
/** SettleRetries' default bound per socket: the largest delivery window. */
const KEPT = 256;

describeWithNats("acknowledgement retries under a flood", () => {
  const startNats = useNatsServer();
  const tmp = useTmpDir("acp-sec-settle-");
  let gateway: GatewayChild | undefined;
  afterEach(async () => {
    await gateway?.kill();
  });

  it("keeps at most 256 per socket, and none of a message that does not exist succeeds", async () => {
    const nats = await startNats();
    gateway = await spawnGateway({ launch: natsGatewayOptions([nats.url], tmp()) });
    const agent = await registerTestAgent(gateway.url, "agent-flooder", "principal-of-flooder");
    const socket = await FrameClient.connect(gateway.wsUrl, agent.apiKey);
    await socket.next("ready");

    process.kill(nats.pid, "SIGSTOP");
    try {
      for (let i = 0; i < FLOOD; i++) {
        socket.send({
          type: "acknowledge",
          id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
          from: "agent-nobody",
        });
      }
      // Every one answered, by id, as the broker could not store it.
      const codes = new Map<number, number>();
      for (let i = 0; i < FLOOD; i++) {
        const error = await socket.next("error", (frame) => frame.id !== undefined, 60_000);
        codes.set(error.error.code, (codes.get(error.error.code) ?? 0) + 1);
      }
      expect(codes).toEqual(new Map([[ErrorCode.StorageUnavailable, FLOOD]]));
    } finally {
      process.kill(nats.pid, "SIGCONT");
    }

    // NATS answers again: the kept ones are tried, and refused (no such message), not stored.
    const outcomes = await until(
      async () => {
        const metrics = await scrapeMetrics(gateway!.url);
        return {
          givenUp: metrics.get('acp_settle_retries_total{outcome="given-up"}') ?? 0,
          settled: metrics.get('acp_settle_retries_total{outcome="settled"}') ?? 0,
        };
      },
      (o) => o.givenUp + o.settled >= KEPT,
      "the kept acknowledgements were tried again",
      30_000,
    );
    expect(outcomes).toEqual({ givenUp: KEPT, settled: 0 });
    // Still serving on the same socket: an unknown message is refused as such, not as unavailable.
    socket.send({ type: "acknowledge", id: "00000000-0000-4000-8000-999999999999", from: "agent-nobody" });
    const answer = await socket.next("error", (frame) => frame.id === "00000000-0000-4000-8000-999999999999");
    expect(answer.error.code).toBe(ErrorCode.NotFound);
    await socket.close();
  }, 180_000);
});
