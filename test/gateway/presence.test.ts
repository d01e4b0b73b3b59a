import { afterEach, describe, expect, it } from "vitest";
import { EmbeddedBroker } from "../../src/broker/embedded/broker.js";
import { PresenceTracker } from "../../src/gateway/presence.js";
import { useTmpDir } from "../helpers/tmp.js";

/**
 * Presence when a gateway died: its agent's connection count was never taken back, so only the
 * heartbeats tell. Another gateway on the same store (a second tracker, the clock moved by hand)
 * reads the agent as offline once its last heartbeat is three periods old.
 */
describe("presence after a gateway died", () => {
  const tmp = useTmpDir("acp-presence-");
  const brokers: EmbeddedBroker[] = [];
  afterEach(async () => {
    for (const broker of brokers.splice(0)) await broker.close();
  });

  it("reads an agent whose heartbeats stopped for three periods as offline, whatever its count says", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    let now = Date.parse("2026-03-01T12:00:00Z");
    const died = new PresenceTracker(broker, 1_000, () => now);
    await died.connected("alice");
    await died.heartbeat("alice");
    died.close(); // the gateway is gone: it never says alice disconnected
    const survivor = new PresenceTracker(broker, 1_000, () => now);
    try {
      now += 2_999;
      await expect(survivor.get("alice")).resolves.toMatchObject({ state: "online", connections: 1 });
      now += 2; // three periods and a bit since the last heartbeat
      await expect(survivor.get("alice")).resolves.toMatchObject({ state: "offline", connections: 1 });
    } finally {
      survivor.close();
    }
  });
});
