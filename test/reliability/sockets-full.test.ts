/**
 * An agent may run as several processes, each with its own socket, up to the gateway's limit per
 * agent; past it a socket is refused with close 4409 (test/security/several-sockets.test.ts has the
 * gateway's side). Here the SDK's side: refused on a reconnect because its agent's other processes
 * hold every socket, it reports the refusal, keeps trying, and is back once a socket is free.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { agentFor, eventually } from "../client/fixtures.js";
import { FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { type LyingGateway, startLyingGateway } from "../security/lying-gateway.js";

describe("the SDK when its agent's sockets are all taken", () => {
  const tmp = useTmpDir("acp-sockets-full-");
  let gw: TestGateway;
  let lying: LyingGateway;
  let bob: TestAgent;
  const cleanups: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    gw = await startTestGateway({ heartbeatMs: 200, limits: { maxSocketsPerAgent: 1 } });
    lying = await startLyingGateway(gw.url);
    bob = await gw.register("bob-assistant", "bob");
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    await lying.close();
    await gw.close();
  });

  it("reports the 4409 refusal, keeps trying, and reconnects once another process let go", async () => {
    // Its reconnect waits 1-2 s, so the other process takes the freed socket first.
    const agent: AcpAgent = agentFor({ url: lying.url }, bob, tmp(), {
      reconnect: { initialDelayMs: 2_000, maxDelayMs: 2_000 },
    });
    const errors: Error[] = [];
    const connections: boolean[] = [];
    agent.on("error", (err) => errors.push(err));
    agent.on("connected", (info) => connections.push(info.reconnected));
    await agent.connect();
    cleanups.push(() => agent.close());

    lying.silence(); // the agent drops its socket after three silent periods…
    await eventually(() => !agent.connected, "the agent dropped its silent socket");
    // …and another process of the agent takes the socket as soon as the gateway freed it.
    let other: FrameClient | undefined;
    await eventually(async () => {
      const candidate = await FrameClient.connect(gw.gateway.wsUrl, bob.apiKey);
      try {
        await candidate.next("ready", undefined, 2_000);
        other = candidate;
        return true;
      } catch {
        return false;
      }
    }, "another process holds the agent's socket");

    await eventually(
      () => errors.some((e) => (e as { code?: number }).code === -32017),
      "the agent reported the refusal",
      15_000,
    );
    expect(connections).toEqual([false]);
    await other?.close();
    await eventually(() => connections.includes(true), "the agent reconnected", 15_000);
    expect(agent.connected).toBe(true);
  });
});
