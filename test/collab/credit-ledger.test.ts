import { afterEach, describe, expect, it } from "vitest";
import { EmbeddedBroker } from "../../src/broker/index.js";
import { CollabAudit } from "../../src/extensions/collab/audit.js";
import { CreditLedger } from "../../src/extensions/collab/credit-ledger.js";
import { AcpError } from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";

describe("escrow ledger", () => {
  const tmp = useTmpDir("acp-ledger-");
  const brokers: EmbeddedBroker[] = [];
  afterEach(async () => {
    for (const b of brokers.splice(0)) await b.close();
  });
  const ledger = () => {
    const broker = EmbeddedBroker.open({ data: tmp() });
    brokers.push(broker);
    return new CreditLedger(broker, new CollabAudit(undefined, () => undefined), async () => null);
  };

  it("never lets concurrent reservations overdraw an account", async () => {
    const l = ledger();
    await l.grant("boss", 100);
    const attempts = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) =>
        l.reserve(`escrow-${String(i).padStart(4, "0")}`, "boss", "worker", 10),
      ),
    );
    const refused = attempts.filter((a) => a.status === "rejected");
    expect(attempts.length - refused.length).toBe(10);
    for (const r of refused) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(AcpError);
    expect(await l.balance("boss")).toEqual({ agentId: "boss", balance: 0, escrowed: 100, incoming: 0 });
  });

  it("moves each escrow once: a second release or refund is a no-op, and release needs a hold", async () => {
    const l = ledger();
    await l.grant("boss", 30);
    await l.reserve("escrow-0001", "boss", "worker", 30);
    expect(await l.release("escrow-0001")).toBeNull();
    expect((await l.hold("escrow-0001"))?.kind).toBe("hold");
    expect(await l.hold("escrow-0001")).toBeNull();
    expect((await l.release("escrow-0001"))?.balances).toEqual({ worker: 30 });
    expect(await l.release("escrow-0001")).toBeNull();
    expect(await l.refund("escrow-0001")).toBeNull();
    expect(await l.balance("worker")).toMatchObject({ balance: 30 });
    expect(await l.balance("boss")).toMatchObject({ balance: 0, escrowed: 0 });
    expect((await l.movements()).map((m) => m.kind)).toEqual(["grant", "reserve", "hold", "release"]);
  });

  it("refuses amounts that are not whole positive credits", async () => {
    const l = ledger();
    for (const amount of [0, -5, 1.5, Number.NaN]) {
      await expect(l.grant("boss", amount)).rejects.toThrow(/amount must be a whole number of credits/);
    }
  });
});
