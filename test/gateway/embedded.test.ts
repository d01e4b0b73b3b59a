import { describe, expect, it } from "vitest";
import { FrameClient, startTestGateway } from "../helpers/gateway.js";
import { gatewaySuite } from "./suite.js";
import { gatewayLimitsSuite } from "./suite-limits.js";
import { severalSocketsSuite } from "./suite-sockets.js";

describe("gateway on the embedded broker", () => {
  gatewaySuite((options) => startTestGateway(options));
});

describe("gateway limits on the embedded broker", () => {
  gatewayLimitsSuite((options) => startTestGateway(options));
});

describe("several sockets of one agent on the embedded broker", () => {
  severalSocketsSuite(async () => {
    const gw = await startTestGateway();
    return { a: gw, b: gw, close: () => gw.close() };
  });

  it("refuses a socket past the agent's limit with 4409, naming the limit; the others carry on", async () => {
    const gw = await startTestGateway({ limits: { maxSocketsPerAgent: 2 } });
    try {
      const agent = await gw.register("agent-busy");
      const open = [await FrameClient.connect(gw.gateway.wsUrl, agent.apiKey)];
      open.push(await FrameClient.connect(gw.gateway.wsUrl, agent.apiKey));
      for (const ws of open) await ws.next("ready");
      const third = await FrameClient.connect(gw.gateway.wsUrl, agent.apiKey);
      const refused = await third.next("error");
      expect(refused.error).toMatchObject({ code: -32017, data: { limit: 2 } });
      await expect(third.next("ready")).rejects.toThrow(/4409/);
      await open[0]!.close();
      const again = await FrameClient.connect(gw.gateway.wsUrl, agent.apiKey);
      await again.next("ready");
      await again.close();
      await open[1]!.close();
    } finally {
      await gw.close();
    }
  });
});
