/**
 * The NATS broker's set-up is tried again while its JetStream requests time out (a replicated
 * stream's create waits for its group's leader, which on a cluster just formed can outlast one
 * request's timeout), and fails at once on anything else.
 */
import { TimeoutError } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { patientSetUp } from "../../src/broker/nats/connection.js";

/** A set-up that fails with `failure()` on its first `failures` tries, then answers "ready". */
function setUpFailing(failures: number, failure: () => Error) {
  const tries = { count: 0 };
  const setUp = async () => {
    tries.count++;
    if (tries.count <= failures) throw failure();
    return "ready";
  };
  return { setUp, tries };
}

describe("patientSetUp (the NATS broker's set-up)", () => {
  it("tries again after timeouts, warning each time, until it succeeds", async () => {
    const warnings: string[] = [];
    const { setUp, tries } = setUpFailing(2, () => new TimeoutError());
    expect(await patientSetUp(setUp, (message) => warnings.push(message), 10_000)).toBe("ready");
    expect(tries.count).toBe(3);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/setting up JetStream timed out; trying again/);
  });

  it("gives up with the timeout once its patience is spent", async () => {
    const { setUp, tries } = setUpFailing(Number.POSITIVE_INFINITY, () => new TimeoutError());
    await expect(patientSetUp(setUp, () => undefined, 1_200)).rejects.toBeInstanceOf(TimeoutError);
    expect(tries.count).toBeGreaterThanOrEqual(2);
    expect(tries.count).toBeLessThanOrEqual(3);
  });

  it("fails at once on anything but a timeout", async () => {
    const { setUp, tries } = setUpFailing(
      1,
      () => new Error("stream name already in use with a different configuration"),
    );
    await expect(patientSetUp(setUp, () => undefined, 10_000)).rejects.toThrow("already in use");
    expect(tries.count).toBe(1);
  });
});
