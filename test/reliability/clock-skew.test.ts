/**
 * Clock skew between agents: the gateway accepts a message whose timestamp is within its window
 * (±5 minutes by default, `skewMs`) of its own clock, and refuses one outside it with -32006
 * StaleTimestamp — in both directions (a sender's clock behind or ahead). What it refuses is
 * never delivered; what it accepts is.
 */
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification, ErrorCode } from "../../src/protocol/index.js";
import { FrameClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { deliveredBefore, handshake, receive, submit } from "../helpers/messaging.js";
import { recordFigures } from "./support/figures.js";

const MINUTE = 60_000;

describe("clock skew", () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
  });

  it.each([
    { name: "default", skewMs: undefined, window: 5 * MINUTE },
    { name: "30s", skewMs: 30_000, window: 30_000 },
  ])(
    "accepts within the $name window and refuses beyond it with -32006",
    async ({ name, skewMs, window }) => {
      gw = await startTestGateway(skewMs === undefined ? {} : { skewMs });
      const alpha = await gw.register("agent-alpha");
      const beta = await gw.register("agent-beta");
      await handshake(gw, alpha, beta);
      const margin = Math.min(10_000, window / 3);
      const within = [-(window - margin), -margin, 0, margin, window - margin];
      const beyond = [-(window + margin), -(window + 10 * MINUTE), window + margin, window + 10 * MINUTE];

      const accepted: string[] = [];
      const refusedCodes: number[] = [];
      for (const offset of [...within, ...beyond]) {
        const message = buildNotification(
          alpha.sender,
          "agent-beta",
          { offset },
          { now: new Date(Date.now() + offset) },
        );
        const res = await submit(gw, alpha, message);
        if (res.status === 202) accepted.push(res.json.id as string);
        else {
          expect(res.status).toBe(400);
          refusedCodes.push((res.json.error as { code: number }).code);
        }
      }
      const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
      // The handshake's two messages to beta come first.
      const delivered = (await receive(ws, 2 + accepted.length)).slice(2);
      const extra = (await deliveredBefore(ws, gw, alpha, "agent-beta")).length;
      await ws.close();
      recordFigures(`clock-skew-${name}`, {
        windowMs: window,
        sent: within.length + beyond.length,
        acceptedWithin: accepted.length,
        refusedBeyond: refusedCodes.length,
        delivered: delivered.length,
        deliveredRefused: extra,
      });

      expect(accepted).toHaveLength(within.length);
      expect(refusedCodes).toEqual(beyond.map(() => ErrorCode.StaleTimestamp));
      expect(delivered).toEqual(accepted);
      expect(extra).toBe(0);
    },
  );
});
