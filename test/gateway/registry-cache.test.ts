import { afterEach, describe, expect, it } from "vitest";
import { EmbeddedBroker } from "../../src/broker/embedded/broker.js";
import type { Broker, KvBucket } from "../../src/broker/index.js";
import { Registry } from "../../src/gateway/registry.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { deferred } from "../client/fixtures.js";
import { useTmpDir } from "../helpers/tmp.js";

/**
 * The registry's cache of resolved agents, with two registries on one broker standing for two
 * gateways on one NATS. A read that a revocation overtakes, and a read that fails, cannot be made
 * to happen on time for real; the agents bucket's `get` is held back, or fails once (the store, the
 * watch and the writes stay real).
 */
function withAgentsGet(broker: Broker, get: (bucket: KvBucket, key: string) => Promise<unknown>): Broker {
  return new Proxy(broker, {
    get(target, prop, receiver) {
      if (prop !== "kv") return Reflect.get(target, prop, receiver);
      return (name: string) => {
        const bucket = target.kv(name) as KvBucket;
        if (name !== "agents") return bucket;
        return new Proxy(bucket, {
          get: (b, p, r) => (p === "get" ? (key: string) => get(b, key) : Reflect.get(b, p, r)),
        });
      };
    },
  });
}

describe("registry cache", () => {
  const tmp = useTmpDir("acp-registry-cache-");
  const open: { stop(): void }[] = [];
  afterEach(() => {
    for (const registry of open.splice(0)) registry.stop();
  });

  const registryOn = async (broker: Broker) => {
    const registry = new Registry(broker);
    await registry.start();
    open.push(registry);
    return registry;
  };
  const register = (registry: Registry, agentId: string) =>
    registry.register({ ...publicIdentity(generateIdentity(agentId, `principal-${agentId}`)) });

  it("does not keep a resolve that another gateway's revocation overtook", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    try {
      const release = deferred<void>();
      const held = deferred<void>();
      let holdNext = false;
      const slow = await registryOn(
        withAgentsGet(broker, async (bucket, key) => {
          const entry = await bucket.get(key);
          if (holdNext) {
            holdNext = false;
            held.resolve(undefined);
            await release.promise;
          }
          return entry;
        }),
      );
      const other = await registryOn(broker);
      await register(other, "alice");

      holdNext = true;
      const first = slow.resolve("alice");
      await held.promise; // slow has read alice, live, and not yet cached her
      await other.revoke("alice");
      release.resolve(undefined);
      expect((await first)?.record.agentId).toBe("alice"); // read before the revocation
      expect(await slow.resolve("alice")).toBeUndefined();
    } finally {
      await broker.close();
    }
  });

  it("does not keep a failed read: the agent resolves once the store answers again", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    try {
      let failNext = false;
      const registry = await registryOn(
        withAgentsGet(broker, async (bucket, key) => {
          if (failNext) {
            failNext = false;
            throw new Error("the store is unavailable");
          }
          return bucket.get(key);
        }),
      );
      await register(registry, "bob");
      failNext = true;
      expect(await registry.resolve("bob")).toBeUndefined();
      expect((await registry.resolve("bob"))?.record.agentId).toBe("bob");
    } finally {
      await broker.close();
    }
  });

  it("lists from memory until an agent is registered, rotated or revoked, here or by another gateway", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    try {
      let gets = 0;
      const registry = await registryOn(
        withAgentsGet(broker, (bucket, key) => {
          gets++;
          return bucket.get(key);
        }),
      );
      const other = await registryOn(broker);
      await register(registry, "alice");
      await register(registry, "bob");
      const ids = async () => (await registry.list()).map((record) => record.agentId).sort();

      expect(await ids()).toEqual(["alice", "bob"]);
      gets = 0;
      expect(await ids()).toEqual(["alice", "bob"]);
      expect(gets).toBe(0);

      await register(other, "carol");
      await expect.poll(ids).toEqual(["alice", "bob", "carol"]);
      await other.revoke("bob");
      await expect
        .poll(async () => (await registry.list()).find((record) => record.agentId === "bob")?.revokedAt)
        .toBeDefined();
      const hashOfAlice = async () =>
        (await registry.list()).find((record) => record.agentId === "alice")?.apiKeyHash;
      const before = await hashOfAlice();
      await registry.rotate("alice");
      expect(await hashOfAlice()).not.toBe(before);
    } finally {
      await broker.close();
    }
  });
});
