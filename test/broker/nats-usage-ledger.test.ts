import type { KV, Kvm } from "@nats-io/kv";
import { Kvm as RealKvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { UsageLedger } from "../../src/broker/nats/usage-ledger.js";
import { resolvePolicy } from "../../src/broker/policy.js";
import { type ResolvedQuotas, resolveQuotas } from "../../src/broker/quotas.js";
import type { SubmitInput } from "../../src/broker/types.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { eventually } from "./support.js";

/**
 * A usage write whose answer is lost is the one fault here that a real nats-server cannot be made
 * to produce on cue, so the bucket is wrapped: the write fails at the caller, and lands (or not)
 * on the real server.
 */
type Fault = "lands-after-the-reread" | "never-lands";

const startNats = useNatsServer();
const connections: NatsConnection[] = [];
const ledgers: UsageLedger[] = [];
afterEach(async () => {
  for (const ledger of ledgers.splice(0)) await ledger.close().catch(() => undefined);
  await Promise.all(connections.splice(0).map((nc) => nc.close()));
});

const policy = resolvePolicy({});
const quotas = resolveQuotas({ recipientPendingMessages: 1_000 }) as ResolvedQuotas;

/** A ledger on `url`; its first write of `fault.key`'s record fails as `fault.kind` says. */
async function openLedger(url: string, fault?: { key: string; kind: Fault }): Promise<UsageLedger> {
  const nc = await connect({ servers: url });
  connections.push(nc);
  const real = new RealKvm(nc);
  const kvm = fault ? faultyKvm(real, fault) : real;
  const ledger = await UsageLedger.open(kvm, 1, quotas, policy, () => undefined);
  ledgers.push(ledger);
  return ledger;
}

function faultyKvm(real: RealKvm, fault: { key: string; kind: Fault }): Kvm {
  let armed = true;
  let landLater: (() => Promise<unknown>) | undefined;
  const wrap = (kv: KV): KV =>
    new Proxy(kv, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== "function") return value;
        if ((property === "create" || property === "update") && armed) {
          return async (key: string, ...rest: unknown[]) => {
            if (key !== fault.key) return value.call(target, key, ...rest);
            armed = false;
            if (fault.kind === "lands-after-the-reread") landLater = () => value.call(target, key, ...rest);
            throw new Error("TIMEOUT: the answer to this write was lost");
          };
        }
        if (property === "get") {
          return async (key: string, ...rest: unknown[]) => {
            const entry = await value.call(target, key, ...rest);
            const late = landLater;
            landLater = undefined;
            // The lost write lands only now, after the writer looked and did not see it.
            if (late) await late();
            return entry;
          };
        }
        return value.bind(target);
      },
    });
  return new Proxy(real, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property === "create") return async (...args: unknown[]) => wrap(await value.apply(target, args));
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as unknown as Kvm;
}

function submission(n: number): SubmitInput {
  return {
    id: `m${n}`,
    from: "alice",
    to: "bob",
    kind: "notification",
    method: "agent.notify",
    envelope: JSON.stringify({ n }),
    submittedAt: new Date().toISOString(),
  };
}

/** Submits three messages to bob through `ledger`, then settles them: bob's queue is empty again. */
async function submitAndSettle(ledger: UsageLedger): Promise<void> {
  const queuedAt = Date.now();
  for (let n = 1; n <= 3; n++) {
    await ledger.submit(
      submission(n),
      queuedAt,
      async () => false,
      async () => ({ id: `m${n}`, status: "queued", duplicate: false }),
    );
  }
  expect(ledger.usage("bob").pendingMessages).toBe(3);
  // The first write of bob's record (the three submissions) goes out, and fails, before the settlements.
  await eventually(async () => {
    if (!ledgers.some((other) => other !== ledger && other.usage("bob").pendingMessages === 3))
      throw new Error("the other gateway does not see bob's three messages yet");
  }, 15_000);
  for (let n = 1; n <= 3; n++) ledger.settled("bob", submission(n).envelope.length, queuedAt);
}

describeWithNats("NATS quota usage: a write whose answer was lost", () => {
  for (const kind of ["lands-after-the-reread", "never-lands"] as const) {
    it(`counts the changes once when the write ${kind === "never-lands" ? "never landed" : "landed after the writer looked"}`, async () => {
      const server = await startNats();
      const writer = await openLedger(server.url, { key: "bob", kind });
      const observer = await openLedger(server.url);
      await submitAndSettle(writer);
      // Both gateways, and a third that starts from the bucket alone, agree bob's queue is empty.
      await eventually(async () => {
        expect(observer.usage("bob").pendingMessages).toBe(0);
        expect(writer.usage("bob").pendingMessages).toBe(0);
      }, 15_000);
      await writer.close();
      const fresh = await openLedger(server.url);
      expect(fresh.usage("bob")).toEqual({ pendingMessages: 0, pendingBytes: 0, storedBytes: 0 });
      expect(fresh.usage("alice").storedBytes).toBe(3 * JSON.stringify({ n: 1 }).length);
    });
  }
});
