/**
 * SettleRetries on its own, with a fake clock: an acknowledgement the broker could not store for a
 * moment is stored on a later try; a refusal, the time limit, the pending limit and a closed
 * socket all end the tries. (The NATS fault itself, end to end: test/reliability/nats-ack-retry.test.ts.)
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BrokerError } from "../../src/broker/errors.js";
import { type SettleFrame, SettleRetries } from "../../src/gateway/settle-retries.js";

const unavailable = () => new BrokerError("unavailable", "NATS: TimeoutError");
const ack = (id: string): SettleFrame => ({ type: "acknowledge", id, from: "agent-sender" });

/** A settle that fails with `failures` (in order), then succeeds; counts its calls. */
function scripted(failures: Error[]) {
  const calls: string[] = [];
  const settle = async (frame: SettleFrame) => {
    calls.push(frame.id);
    const failure = failures.shift();
    if (failure) throw failure;
  };
  return { calls, settle };
}

describe("SettleRetries", () => {
  const outcomes: string[] = [];
  beforeEach(() => {
    vi.useFakeTimers();
    outcomes.length = 0;
  });
  afterEach(() => vi.useRealTimers());

  it("stores an acknowledgement on a later try, waiting twice as long after each failure", async () => {
    const { calls, settle } = scripted([unavailable(), unavailable()]);
    const retries = new SettleRetries(settle, (o) => outcomes.push(o));
    expect(retries.retry(ack("m1"), unavailable())).toBe(true);
    // The same message again while it is being tried: one series of tries, not two.
    expect(retries.retry(ack("m1"), unavailable())).toBe(true);
    await vi.advanceTimersByTimeAsync(249);
    expect(calls).toEqual([]);
    await vi.advanceTimersByTimeAsync(1); // 250 ms: fails
    expect(calls).toEqual(["m1"]);
    await vi.advanceTimersByTimeAsync(499);
    expect(calls).toEqual(["m1"]);
    await vi.advanceTimersByTimeAsync(1); // +500 ms: fails
    await vi.advanceTimersByTimeAsync(1_000); // +1 s: stored
    expect(calls).toEqual(["m1", "m1", "m1"]);
    expect(outcomes).toEqual(["settled"]);
    expect(retries.pending).toBe(0);
  });

  it("does not try again what the broker refused for good, nor after a refusal on a later try", async () => {
    const { calls, settle } = scripted([new BrokerError("invalid_state", "message m2 is expired")]);
    const retries = new SettleRetries(settle, (o) => outcomes.push(o));
    expect(retries.retry(ack("m1"), new BrokerError("not_found", "no message m1"))).toBe(false);
    expect(retries.retry(ack("m1"), new Error("not a broker error"))).toBe(false);
    expect(retries.retry(ack("m2"), unavailable())).toBe(true);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toEqual(["m2"]);
    expect(outcomes).toEqual(["given-up"]);
    expect(retries.pending).toBe(0);
  });

  it("gives up once the next try would come after giveUpAfterMs", async () => {
    const { calls, settle } = scripted(Array.from({ length: 100 }, unavailable));
    const retries = new SettleRetries(settle, (o) => outcomes.push(o), { giveUpAfterMs: 10_000 });
    retries.retry(ack("m1"), unavailable());
    await vi.advanceTimersByTimeAsync(60_000);
    // 250, 500, 1000, 2000, 4000 ms: the next (4 s more, at 11.75 s) would be past 10 s.
    expect(calls).toHaveLength(5);
    expect(outcomes).toEqual(["given-up"]);
  });

  it("keeps at most maxPending decisions; the rest are left to the redelivery", async () => {
    const { settle } = scripted([]);
    const retries = new SettleRetries(settle, (o) => outcomes.push(o), { maxPending: 2 });
    expect(retries.retry(ack("m1"), unavailable())).toBe(true);
    expect(retries.retry(ack("m2"), unavailable())).toBe(true);
    expect(retries.retry(ack("m3"), unavailable())).toBe(false);
    expect(retries.pending).toBe(2);
    await vi.advanceTimersByTimeAsync(250);
    expect(outcomes).toEqual(["settled", "settled"]);
    expect(retries.retry(ack("m3"), unavailable())).toBe(true);
  });

  it("stops trying when the socket closes, even with a try under way", async () => {
    let release: (() => void) | undefined;
    const calls: string[] = [];
    const settle = (frame: SettleFrame) => {
      calls.push(frame.id);
      return new Promise<void>((_, reject) => {
        release = () => reject(unavailable());
      });
    };
    const retries = new SettleRetries(settle, (o) => outcomes.push(o));
    retries.retry(ack("m1"), unavailable());
    retries.retry(ack("m2"), unavailable());
    await vi.advanceTimersByTimeAsync(250);
    expect(calls).toEqual(["m1", "m2"]);
    retries.close();
    release?.();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toEqual(["m1", "m2"]);
    expect(outcomes).toEqual([]);
    expect(retries.retry(ack("m3"), unavailable())).toBe(false);
  });
});
