import { afterEach, describe, expect, it } from "vitest";
import { EmbeddedBroker } from "../../src/broker/embedded/broker.js";
import type { Broker, KvBucket, KvChange } from "../../src/broker/index.js";
import { HandshakeGate } from "../../src/gateway/handshake-gate.js";
import type { EnvelopeHeaders } from "../../src/protocol/index.js";
import { deferred } from "../client/fixtures.js";
import { until } from "../helpers/until.js";
import { useTmpDir } from "../helpers/tmp.js";

/**
 * The gate's cache of pair states, with two gates on one broker standing for two gateways on one
 * NATS. The race needs a read that a concurrent write overtakes; the broker cannot be made that
 * slow for real, so one read is held back (the store, the watch and the writes stay real).
 */
const headers = (from: string, to: string) =>
  ({ "agent-id": from, "recipient-id": to, "skill-layers-loaded": [1] }) as unknown as EnvelopeHeaders;

/**
 * The broker, with `get` on the handshakes bucket held after reading until `release` resolves, and
 * `told` called with each change its watch hands the gate (after the gate had it).
 */
function withHeldRead(
  broker: Broker,
  release: Promise<void>,
  held: () => void,
  told: (change: KvChange<unknown>) => void,
): Broker {
  return new Proxy(broker, {
    get(target, prop, receiver) {
      if (prop !== "kv") return Reflect.get(target, prop, receiver);
      return (name: string) => {
        const bucket = target.kv(name) as KvBucket;
        let holdNext = true;
        return new Proxy(bucket, {
          get(b, p, r) {
            if (p === "watch")
              return (handler: (change: KvChange<unknown>) => void, options?: { prefix?: string }) =>
                b.watch((change) => {
                  handler(change);
                  told(change);
                }, options);
            if (p !== "get") return Reflect.get(b, p, r);
            return async (key: string) => {
              const entry = await b.get(key);
              if (holdNext) {
                holdNext = false;
                held();
                await release;
              }
              return entry;
            };
          },
        });
      };
    },
  });
}

/** The broker, with the handshakes bucket's watch started but silent: a watch that ended unnoticed. */
function withSilentWatch(broker: Broker): Broker {
  return new Proxy(broker, {
    get(target, prop, receiver) {
      if (prop !== "kv") return Reflect.get(target, prop, receiver);
      return (name: string) =>
        new Proxy(target.kv(name) as KvBucket, {
          get(b, p, r) {
            if (p !== "watch") return Reflect.get(b, p, r);
            return async () => () => undefined;
          },
        });
    },
  });
}

/** The broker, with the handshakes bucket's watch failing to start, or counting the watches still open. */
function withWatch(broker: Broker, watches: { open: number; fail?: boolean }): Broker {
  return new Proxy(broker, {
    get(target, prop, receiver) {
      if (prop !== "kv") return Reflect.get(target, prop, receiver);
      return (name: string) =>
        new Proxy(target.kv(name) as KvBucket, {
          get(b, p, r) {
            if (p !== "watch") return Reflect.get(b, p, r);
            return async (...args: Parameters<KvBucket["watch"]>) => {
              if (watches.fail) throw new Error("the broker refused the watch");
              const unwatch = await b.watch(...args);
              watches.open += 1;
              return () => {
                watches.open -= 1;
                unwatch();
              };
            };
          },
        });
    },
  });
}

async function completeHandshake(gate: HandshakeGate): Promise<void> {
  await gate.observe("agent.announce", headers("alice", "bob"), "alice#k");
  await gate.observe("agent.announce", headers("bob", "alice"), "bob#k");
  await gate.observe("agent.capabilities", headers("alice", "bob"), "alice#k");
  await gate.observe("agent.capabilities", headers("bob", "alice"), "bob#k");
}

describe("HandshakeGate", () => {
  const tmp = useTmpDir("acp-gate-");
  const brokers: Broker[] = [];
  afterEach(async () => {
    for (const b of brokers.splice(0)) await b.close();
  });

  it("a pair completed at another gateway while a read was under way is not refused afterwards", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const release = deferred();
    const readHeld = deferred();
    const toldOf: string[] = [];
    const slow = new HandshakeGate(
      withHeldRead(
        broker,
        release.promise,
        () => readHeld.resolve(),
        (change) => toldOf.push(change.key),
      ),
    );
    const other = new HandshakeGate(broker);
    await slow.start();
    await other.start();
    try {
      // This gateway reads the pair before it is complete; the read comes back late…
      const first = slow.require(headers("alice", "bob"), "alice#k");
      await readHeld.promise;
      // …after the other gateway relayed the whole handshake.
      await other.observe("agent.announce", headers("alice", "bob"), "alice#k");
      await other.observe("agent.announce", headers("bob", "alice"), "bob#k");
      await other.observe("agent.capabilities", headers("alice", "bob"), "alice#k");
      await other.observe("agent.capabilities", headers("bob", "alice"), "bob#k");
      await until(
        () => toldOf.filter((key) => key === "alice.bob").length,
        (changes) => changes === 4,
        "the watch has told this gateway of the four steps",
      );
      release.resolve();
      await expect(first).rejects.toMatchObject({ reason: "HandshakeRequired" });
      // What it read was already out of date: it must not be kept.
      await expect(slow.require(headers("alice", "bob"), "alice#k")).resolves.toBeUndefined();
    } finally {
      slow.stop();
      other.stop();
    }
  });

  it("a refused pair is read again, so completing it elsewhere lets the next message through", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const here = new HandshakeGate(broker);
    const there = new HandshakeGate(broker);
    await here.start();
    await there.start();
    try {
      await expect(here.require(headers("alice", "bob"), "alice#k")).rejects.toMatchObject({
        reason: "HandshakeRequired",
      });
      await there.observe("agent.announce", headers("alice", "bob"), "alice#k");
      await there.observe("agent.announce", headers("bob", "alice"), "bob#k");
      await there.observe("agent.capabilities", headers("alice", "bob"), "alice#k");
      await there.observe("agent.capabilities", headers("bob", "alice"), "bob#k");
      await expect(here.require(headers("alice", "bob"), "alice#k")).resolves.toBeUndefined();
      await expect(here.require(headers("bob", "alice"), "bob#k")).resolves.toBeUndefined();
    } finally {
      here.stop();
      there.stop();
    }
  });

  it("never keeps an incomplete pair, and reads a complete one again once it is a minute old", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    let now = Date.now();
    // This gateway hears nothing from the watch; the other writes to the same bucket.
    const deaf = new HandshakeGate(withSilentWatch(broker), { now: () => now });
    const other = new HandshakeGate(broker);
    await deaf.start();
    await other.start();
    try {
      await expect(deaf.require(headers("alice", "bob"), "alice#k")).rejects.toMatchObject({
        reason: "HandshakeRequired",
      });
      await completeHandshake(other);
      // The refusal was not kept: the completed pair is read again.
      await expect(deaf.require(headers("alice", "bob"), "alice#k")).resolves.toBeUndefined();
      // Reset elsewhere (a re-announce), unheard here: the cached pair is used for up to a minute…
      await other.observe("agent.announce", headers("bob", "alice"), "bob#k");
      await expect(deaf.require(headers("alice", "bob"), "alice#k")).resolves.toBeUndefined();
      // …then read again.
      now += 61_000;
      await expect(deaf.require(headers("alice", "bob"), "alice#k")).rejects.toMatchObject({
        reason: "HandshakeRequired",
      });
      // Neither an incomplete pair this gateway wrote itself…
      await deaf.observe("agent.announce", headers("carol", "dave"), "carol#k");
      await other.observe("agent.announce", headers("dave", "carol"), "dave#k");
      await other.observe("agent.capabilities", headers("carol", "dave"), "carol#k");
      await other.observe("agent.capabilities", headers("dave", "carol"), "dave#k");
      await expect(deaf.require(headers("carol", "dave"), "carol#k")).resolves.toBeUndefined();
      // …nor one it was asked about.
      await other.observe("agent.announce", headers("erin", "frank"), "erin#k");
      await expect(deaf.completed("erin", "frank")).resolves.toBe(false);
      await other.observe("agent.announce", headers("frank", "erin"), "frank#k");
      await other.observe("agent.capabilities", headers("erin", "frank"), "erin#k");
      await other.observe("agent.capabilities", headers("frank", "erin"), "frank#k");
      await expect(deaf.completed("erin", "frank")).resolves.toBe(true);
    } finally {
      deaf.stop();
      other.stop();
    }
  });
  it("refuses a message signed with another key than the announced one, and resets the pair for both sides", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    await gate.start();
    try {
      await completeHandshake(gate);
      await expect(gate.completed("alice", "bob")).resolves.toBe(true);
      await expect(gate.require(headers("alice", "bob"), "alice#other")).rejects.toMatchObject({
        message: "the signing key changed since the handshake; handshake again",
        data: { peer: "bob" },
      });
      await expect(gate.completed("alice", "bob")).resolves.toBe(false);
      await expect(gate.require(headers("bob", "alice"), "bob#k")).rejects.toMatchObject({
        reason: "HandshakeRequired",
      });
      // Capabilities signed by another key than the announce do not count either.
      await gate.observe("agent.announce", headers("alice", "bob"), "alice#k");
      await expect(
        gate.observe("agent.capabilities", headers("alice", "bob"), "alice#other"),
      ).rejects.toMatchObject({
        reason: "HandshakeRequired",
      });
    } finally {
      gate.stop();
    }
  });

  it("a pair is complete only when both sides announced and sent capabilities", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    const refused = (from: string, to: string) =>
      expect(gate.require(headers(from, to), `${from}#k`)).rejects.toThrow(
        `complete the four-step handshake between ${from} and ${to} first`,
      );
    await expect(
      gate.observe("agent.capabilities", headers("alice", "bob"), "alice#k"),
    ).rejects.toMatchObject({
      reason: "HandshakeRequired",
      message: "agent.capabilities before a verified agent.announce with the same key",
      data: { peer: "bob" },
    });
    await gate.observe("agent.announce", headers("alice", "bob"), "alice#k");
    await refused("alice", "bob");
    await expect(gate.require(headers("bob", "alice"), "bob#k")).rejects.toMatchObject({
      data: {
        peer: "alice",
        missing: [
          { agentId: "bob", method: "agent.announce" },
          { agentId: "bob", method: "agent.capabilities" },
          { agentId: "alice", method: "agent.capabilities" },
        ],
      },
    });
    await gate.observe("agent.announce", headers("bob", "alice"), "bob#k");
    await refused("alice", "bob");
    await gate.observe("agent.capabilities", headers("alice", "bob"), "alice#k");
    await expect(gate.completed("alice", "bob")).resolves.toBe(false);
    // The refusal names what the gateway has not relayed yet.
    await expect(gate.require(headers("alice", "bob"), "alice#k")).rejects.toMatchObject({
      data: { peer: "bob", missing: [{ agentId: "bob", method: "agent.capabilities" }] },
    });
    await refused("alice", "bob");
    await refused("bob", "alice");
    await gate.observe("agent.capabilities", headers("bob", "alice"), "bob#k");
    await expect(gate.completed("alice", "bob")).resolves.toBe(true);
    await expect(gate.completed("bob", "alice")).resolves.toBe(true);
    // Another gateway on the same broker reads the completed pair from the bucket.
    await expect(new HandshakeGate(broker).completed("alice", "bob")).resolves.toBe(true);
    await expect(gate.require(headers("bob", "alice"), "bob#k")).resolves.toBeUndefined();
    await expect(gate.announcedAt("alice", "bob")).resolves.toEqual(expect.any(Number));
    await expect(gate.announcedAt("alice", "carol")).resolves.toBeUndefined();
  });

  it("relays a response while its signer re-handshakes with the same key, never with another", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    await completeHandshake(gate);
    await gate.observe("agent.announce", headers("bob", "alice"), "bob#k"); // bob starts over
    await expect(gate.require(headers("bob", "alice"), "bob#k", true)).resolves.toBeUndefined();
    await expect(gate.require(headers("bob", "alice"), "bob#k")).rejects.toMatchObject({
      reason: "HandshakeRequired",
      data: { peer: "alice" },
    });
    await expect(gate.require(headers("bob", "alice"), "bob#other", true)).rejects.toMatchObject({
      reason: "HandshakeRequired",
    });
    // A response from a side that never announced is refused too.
    await expect(gate.require(headers("carol", "alice"), "carol#k", true)).rejects.toMatchObject({
      reason: "HandshakeRequired",
    });
  });

  it("keeps each side's signed announce and capabilities as its proof, a new announce starting it over", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    await expect(gate.proof("alice", "bob")).resolves.toBeUndefined();
    await gate.observe("agent.capabilities", headers("bob", "alice"), "bob#k", "caps-early").catch(() => {});
    await gate.observe("agent.announce", headers("alice", "bob"), "alice#k", "announce-1");
    await expect(gate.proof("alice", "bob")).resolves.toEqual({ announce: "announce-1" });
    await gate.observe("agent.capabilities", headers("alice", "bob"), "alice#k", "caps-1");
    await expect(gate.proof("alice", "bob")).resolves.toEqual({
      announce: "announce-1",
      capabilities: "caps-1",
    });
    await expect(gate.proof("bob", "alice")).resolves.toBeUndefined();
    await gate.observe("agent.announce", headers("alice", "bob"), "alice#k", "announce-2");
    await expect(gate.proof("alice", "bob")).resolves.toEqual({ announce: "announce-2" });
    // Without the signed text (a gateway's own agents), only the state is kept.
    await gate.observe("agent.announce", headers("alice", "carol"), "alice#k");
    await gate.observe("agent.capabilities", headers("alice", "carol"), "alice#k", "caps-to-carol");
    await expect(gate.proof("alice", "carol")).resolves.toBeUndefined();
  });

  it("keeps a pair with an agent of another domain under a key of its own, and completes it", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    const remote = "bob@other.example";
    await gate.observe("agent.announce", headers("alice", remote), "alice#k", "a");
    await gate.observe("agent.announce", headers(remote, "alice"), "bob#k", "b");
    await gate.observe("agent.capabilities", headers("alice", remote), "alice#k", "ac");
    await gate.observe("agent.capabilities", headers(remote, "alice"), "bob#k", "bc");
    await expect(gate.require(headers("alice", remote), "alice#k")).resolves.toBeUndefined();
    await expect(gate.proof(remote, "alice")).resolves.toEqual({ announce: "b", capabilities: "bc" });
    const keys = await broker.kv("handshakes").keys();
    expect(keys.some((key) => key.startsWith("fed/") && !key.includes("@"))).toBe(true);
    const proofKeys = await broker.kv("handshake-proofs").keys();
    expect(proofKeys.filter((key) => key.startsWith("fed/"))).toHaveLength(2);
    // The local pair alice/bob is another pair altogether.
    await expect(gate.completed("alice", "bob")).resolves.toBe(false);
  });

  it("accepts the handshaken layers in any order, and refuses a different set or count", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    const alice = (layers: number[]) =>
      ({ ...headers("alice", "bob"), "skill-layers-loaded": layers }) as unknown as EnvelopeHeaders;
    const handshakeWith = async (layers: number[]) => {
      await gate.observe("agent.announce", alice(layers), "alice#k");
      await gate.observe("agent.announce", headers("bob", "alice"), "bob#k");
      await gate.observe("agent.capabilities", alice(layers), "alice#k");
      await gate.observe("agent.capabilities", headers("bob", "alice"), "bob#k");
    };
    await handshakeWith([0, 2, 1]);
    await expect(gate.require(alice([0, 2, 1]), "alice#k")).resolves.toBeUndefined();
    await expect(gate.require(alice([1, 0, 2]), "alice#k")).resolves.toBeUndefined();
    await expect(gate.require(alice([0, 1, 3]), "alice#k")).rejects.toThrow(/declared skill layers changed/);
    await handshakeWith([0, 2, 1]);
    await expect(gate.require(alice([0, 1]), "alice#k")).rejects.toThrow(/declared skill layers changed/);
    // A layer dropped from the end, and a set that differs from the handshaken one at every position.
    await handshakeWith([0, 2, 1]);
    await expect(gate.require(alice([0, 2]), "alice#k")).rejects.toThrow(/declared skill layers changed/);
    await handshakeWith([0, 2, 1]);
    await expect(gate.require(alice([1, 0, 3]), "alice#k")).rejects.toThrow(/declared skill layers changed/);
    // Layer numbers have no upper bound: sets whose digits run together alike still differ.
    await handshakeWith([1, 230]);
    await expect(gate.require(alice([30, 12]), "alice#k")).rejects.toThrow(/declared skill layers changed/);
  });
  it("routes each handshake reply to the socket the peer's latest handshake message came through", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    const observe = (
      method: "agent.announce" | "agent.capabilities",
      from: string,
      to: string,
      via: { replyTo?: string; isReply?: boolean },
    ) => gate.observe(method, headers(from, to), `${from}#k`, undefined, via);
    // An announce that opens a handshake answers nobody: it has no route of its own.
    await expect(
      observe("agent.announce", "alice", "bob", { replyTo: "gw/alice-1" }),
    ).resolves.toBeUndefined();
    await expect(
      observe("agent.announce", "bob", "alice", { replyTo: "gw/bob-1", isReply: true }),
    ).resolves.toBe("gw/alice-1");
    await expect(
      observe("agent.capabilities", "alice", "bob", { replyTo: "gw/alice-2", isReply: true }),
    ).resolves.toBe("gw/bob-1");
    // A side's capabilities sent without a route keep the route its announce came through.
    await expect(observe("agent.capabilities", "bob", "alice", { isReply: true })).resolves.toBe(
      "gw/alice-2",
    );
    await expect(observe("agent.announce", "alice", "bob", { isReply: true })).resolves.toBe("gw/bob-1");
    // A reply to a peer that has not announced yet has no route either.
    await expect(observe("agent.announce", "dave", "erin", {})).resolves.toBeUndefined();
    await expect(observe("agent.capabilities", "dave", "erin", { isReply: true })).resolves.toBeUndefined();
    // Not a reply: no route, even though the peer has one.
    await expect(observe("agent.announce", "bob", "alice", { replyTo: "gw/bob-3" })).resolves.toBeUndefined();
  });

  it("two gateways recording one pair's announces at the same moment both count", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const here = new HandshakeGate(broker);
    const there = new HandshakeGate(broker);
    // Both read the pair before either writes it: one write conflicts, is retried on the new state.
    await Promise.all([
      here.observe("agent.announce", headers("alice", "bob"), "alice#k"),
      there.observe("agent.announce", headers("bob", "alice"), "bob#k"),
    ]);
    await Promise.all([
      here.observe("agent.capabilities", headers("alice", "bob"), "alice#k"),
      there.observe("agent.capabilities", headers("bob", "alice"), "bob#k"),
    ]);
    await expect(here.completed("alice", "bob")).resolves.toBe(true);
    await expect(there.require(headers("bob", "alice"), "bob#k")).resolves.toBeUndefined();
  });

  it("retries a write the pair changed under, and gives up with Conflict after a few attempts", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    const bucket = broker.kv<Record<string, unknown>>("handshakes");
    let attempts = 0;
    // Another writer changes the pair between each of this gate's reads and its write.
    const contended = new Proxy(broker, {
      get(target, prop, receiver) {
        if (prop !== "kv") return Reflect.get(target, prop, receiver);
        return (name: string) =>
          new Proxy(target.kv(name) as KvBucket, {
            get(b, p, r) {
              if (p !== "get" || name !== "handshakes") return Reflect.get(b, p, r);
              return async (key: string) => {
                const entry = await b.get(key);
                attempts += 1;
                await bucket.put(key, { [`other-${attempts}`]: {} });
                return entry;
              };
            },
          });
      },
    });
    const contendedGate = new HandshakeGate(contended);
    await expect(
      contendedGate.observe("agent.announce", headers("alice", "bob"), "alice#k"),
    ).rejects.toMatchObject({
      reason: "Conflict",
      message: "the handshake state changed concurrently; retry",
    });
    // It tried again on the new state, a bounded number of times.
    expect(attempts).toBeGreaterThan(1);
    expect(attempts).toBeLessThanOrEqual(5);
    // Uncontended, the same announce is recorded.
    await gate.observe("agent.announce", headers("alice", "bob"), "alice#k");
    await expect(gate.announcedAt("alice", "bob")).resolves.toEqual(expect.any(Number));
  });

  it("start fails when the bucket cannot be watched, and stop ends the watch", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    await expect(new HandshakeGate(withWatch(broker, { open: 0, fail: true })).start()).rejects.toThrow(
      "cannot watch KV bucket handshakes",
    );
    const watches = { open: 0 };
    const gate = new HandshakeGate(withWatch(broker, watches));
    await gate.start();
    expect(watches.open).toBe(1);
    gate.stop();
    await until(
      () => watches.open,
      (open) => open === 0,
      "the stopped gate's watch is closed",
    );
  });
  it("keeps apart two pairs with one agent of another domain, whichever of the two sorts first", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    const gate = new HandshakeGate(broker);
    const remote = "bob@other.example";
    // alice sorts before the address, zoe after it.
    await gate.observe("agent.announce", headers("alice", remote), "alice#k");
    await gate.observe("agent.announce", headers(remote, "alice"), "bob#k");
    await gate.observe("agent.capabilities", headers("alice", remote), "alice#k");
    await gate.observe("agent.capabilities", headers(remote, "alice"), "bob#k");
    await gate.observe("agent.announce", headers("zoe", remote), "zoe#k");
    await gate.observe("agent.capabilities", headers("zoe", remote), "zoe#k");
    // bob never answered zoe: its handshake with alice does not count for her.
    await expect(gate.require(headers("zoe", remote), "zoe#k")).rejects.toMatchObject({
      reason: "HandshakeRequired",
    });
    await expect(gate.require(headers("alice", remote), "alice#k")).resolves.toBeUndefined();
    const keys = await broker.kv("handshakes").keys();
    expect(keys).toHaveLength(2);
    expect(keys.every((key) => key.startsWith("fed/") && !key.includes("@"))).toBe(true);
  });
  it("reports a write that fails for another reason than a conflict as itself, without retrying", async () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    let writes = 0;
    const failing = new Proxy(broker, {
      get(target, prop, receiver) {
        if (prop !== "kv") return Reflect.get(target, prop, receiver);
        return (name: string) =>
          new Proxy(target.kv(name) as KvBucket, {
            get(b, p, r) {
              if (p !== "create" || name !== "handshakes") return Reflect.get(b, p, r);
              return async () => {
                writes += 1;
                throw new Error("disk I/O error");
              };
            },
          });
      },
    });
    const gate = new HandshakeGate(failing);
    await expect(gate.observe("agent.announce", headers("alice", "bob"), "alice#k")).rejects.toThrow(
      "disk I/O error",
    );
    expect(writes).toBe(1);
  });
});
