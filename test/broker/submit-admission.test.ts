import { afterEach, describe, expect, it, vi } from "vitest";
import { BrokerError } from "../../src/broker/errors.js";
import { SubmitAdmission } from "../../src/broker/nats/submit-admission.js";
import { deferred } from "../client/fixtures.js";

/** The bound on submissions a NATS gateway has in JetStream at once (the broker-level test is in nats-admission.test.ts). */
describe("SubmitAdmission", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("stores at most `max` at once, the others in arrival order as places free up", async () => {
    const admission = new SubmitAdmission(2, 60_000);
    const started: number[] = [];
    const stores = Array.from({ length: 5 }, () => deferred<void>());
    const done = stores.map((store, i) =>
      admission.run(async () => {
        started.push(i);
        await store.promise;
        return i;
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    expect(admission.load).toEqual({ running: 2, waiting: 3 });
    stores[1]?.resolve();
    await expect(done[1]).resolves.toBe(1);
    expect(started).toEqual([0, 1, 2]);
    stores[0]?.resolve();
    stores[2]?.resolve();
    await Promise.all([done[0], done[2]]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    stores[3]?.resolve();
    stores[4]?.resolve();
    await expect(Promise.all(done)).resolves.toEqual([0, 1, 2, 3, 4]);
    expect(admission.load).toEqual({ running: 0, waiting: 0 });
  });

  it("frees the place of a store that failed", async () => {
    const admission = new SubmitAdmission(1, 60_000);
    await expect(admission.run(() => Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    await expect(
      admission.run(() => {
        throw new Error("thrown");
      }),
    ).rejects.toThrow("thrown");
    await expect(admission.run(async () => "stored")).resolves.toBe("stored");
  });

  it("refuses as unavailable, before storing anything, a submission that waited too long", async () => {
    vi.useFakeTimers();
    const admission = new SubmitAdmission(1, 5_000);
    const first = deferred<void>();
    const running = admission.run(() => first.promise);
    let storedLate = false;
    const late = admission.run(async () => {
      storedLate = true;
    });
    late.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(4_000);
    expect(admission.load).toEqual({ running: 1, waiting: 1 });
    // Arrived after the first waited 4 s: waits its own 5 s.
    const later = admission.run(async () => "later");
    await vi.advanceTimersByTimeAsync(1_300);
    const refusal = await late.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(BrokerError);
    expect(refusal).toMatchObject({ kind: "unavailable" });
    expect((refusal as Error).message).toBe(
      "NATS is not keeping up: the message waited 5 s for one of the 1 places for submissions being stored, and was not accepted; submit it again later",
    );
    expect(storedLate).toBe(false);
    first.resolve();
    await running;
    await expect(later).resolves.toBe("later");
  });

  it("refuses what waits when closed, and names bad limits", async () => {
    const admission = new SubmitAdmission(1, 60_000);
    const first = deferred<void>();
    const running = admission.run(() => first.promise);
    const waiting = admission.run(async () => undefined);
    admission.close();
    await expect(waiting).rejects.toMatchObject({ kind: "closed" });
    first.resolve();
    await running;
    expect(() => new SubmitAdmission(0, 1)).toThrow(
      expect.objectContaining({ kind: "invalid_argument", field: "nats.maxPendingSubmits" }),
    );
    expect(() => new SubmitAdmission(1, -1)).toThrow(
      expect.objectContaining({ kind: "invalid_argument", field: "nats.submitStallMs" }),
    );
  });
});
