import { describe, expect, it } from "vitest";
import { ErrorCode, ReplayGuard } from "../../src/protocol/index.js";
import { acpErrorOf } from "./fixtures.js";

const T0 = Date.parse("2026-02-14T12:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString();

/** A guard whose clock the test moves by hand. */
function guardAt(start: number, skewMs?: number) {
  const clock = { now: start };
  const guard = new ReplayGuard({ now: () => clock.now, ...(skewMs === undefined ? {} : { skewMs }) });
  return { guard, clock };
}

describe("ReplayGuard", () => {
  it("defaults to a ±5 minute window, inclusive at its edges", () => {
    const { guard } = guardAt(T0);
    expect(guard.skewMs).toBe(300_000);
    expect(() => guard.check("edge-past-0001", iso(T0 - 300_000))).not.toThrow();
    expect(() => guard.check("edge-future-01", iso(T0 + 300_000))).not.toThrow();
    expect(acpErrorOf(() => guard.check("beyond-past-01", iso(T0 - 300_001))).code).toBe(
      ErrorCode.StaleTimestamp,
    );
    expect(acpErrorOf(() => guard.check("beyond-future1", iso(T0 + 300_001))).code).toBe(
      ErrorCode.StaleTimestamp,
    );
  });

  it("reports how far off the clock the timestamp is, at the given header path", () => {
    const { guard } = guardAt(T0);
    const err = acpErrorOf(() => guard.check("stale-message1", iso(T0 - 600_000), "/result/headers"));
    expect(err.data.problems).toEqual([
      { path: "/result/headers/timestamp", message: "-600s from the receiver's clock" },
    ]);
  });

  it("honours a configured window", () => {
    const { guard } = guardAt(T0, 10_000);
    expect(() => guard.check("inside-window1", iso(T0 - 10_000))).not.toThrow();
    expect(acpErrorOf(() => guard.check("outside-window", iso(T0 - 10_001))).code).toBe(
      ErrorCode.StaleTimestamp,
    );
  });

  it("refuses an id seen within the window, whatever timestamp the repeat carries", () => {
    const { guard, clock } = guardAt(T0);
    guard.check("message-00001", iso(T0));
    clock.now += 60_000;
    const err = acpErrorOf(() => guard.check("message-00001", iso(clock.now)));
    expect(err.code).toBe(ErrorCode.Replay);
    expect(err.data.problems?.[0]?.path).toBe("/params/headers/message-id");
    expect(() => guard.check("message-00002", iso(clock.now))).not.toThrow();
  });

  it("refuses a repeat for as long as its timestamp could still pass, then forgets the id", () => {
    const { guard, clock } = guardAt(T0);
    guard.check("message-00001", iso(T0 + 300_000)); // sent from a clock 5 minutes ahead
    clock.now = T0 + 599_000; // the same text would still be inside the window
    expect(acpErrorOf(() => guard.check("message-00001", iso(T0 + 300_000))).code).toBe(ErrorCode.Replay);
    // Once the original timestamp has left the window, the timestamp check alone refuses the text.
    clock.now = T0 + 900_001;
    expect(acpErrorOf(() => guard.check("message-00001", iso(T0 + 300_000))).code).toBe(
      ErrorCode.StaleTimestamp,
    );
    guard.check("message-00002", iso(clock.now)); // triggers pruning
    expect(guard.size).toBe(1);
  });

  it("keeps memory bounded by pruning ids whose window has passed", () => {
    const { guard, clock } = guardAt(T0);
    for (let i = 0; i < 100; i++) guard.check(`bulk-message-${i}`, iso(T0));
    expect(guard.size).toBe(100);
    clock.now = T0 + 700_000;
    guard.check("later-message", iso(clock.now));
    expect(guard.size).toBe(1);
  });

  it("treats an unparseable timestamp as outside the window", () => {
    const { guard } = guardAt(T0);
    expect(acpErrorOf(() => guard.check("bad-timestamp1", "not a date")).code).toBe(ErrorCode.StaleTimestamp);
  });
});
