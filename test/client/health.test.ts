/**
 * The agent's `degraded` / `recovered` events (GatewayHealth): one pair for a run of failures,
 * recovered only after the gateway worked again with no failure for RECOVERY_QUIET_MS. Time is
 * mocked; the real fault (a NATS stream-leader election) is test/reliability/nats-election-quiet.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { GatewayUnreachableError } from "../../src/client/errors.js";
import {
  type DegradedInfo,
  GatewayHealth,
  isGatewayTrouble,
  RECOVERY_QUIET_MS,
  type RecoveredInfo,
} from "../../src/client/health.js";
import { AcpError } from "../../src/protocol/index.js";

describe("GatewayHealth", () => {
  let degraded: DegradedInfo[];
  let recovered: RecoveredInfo[];
  let health: GatewayHealth;
  beforeEach(() => {
    vi.useFakeTimers();
    degraded = [];
    recovered = [];
    health = new GatewayHealth({
      degraded: (info) => degraded.push(info),
      recovered: (info) => recovered.push(info),
    });
  });
  afterEach(() => {
    health.close();
    vi.useRealTimers();
  });

  const unavailable = new AcpError("StorageUnavailable", "NATS: JetStream answered 503");

  it("many failures are one degraded; a success after a quiet period is one recovered", () => {
    for (let i = 0; i < 25; i++) {
      health.failed(unavailable);
      vi.advanceTimersByTime(100);
    }
    expect(degraded).toEqual([
      { reason: "NATS: JetStream answered 503", code: unavailable.code, since: expect.any(String) },
    ]);
    health.succeeded();
    expect(recovered).toEqual([]); // the last failure is only 100 ms old
    vi.advanceTimersByTime(RECOVERY_QUIET_MS);
    expect(recovered).toEqual([{ degradedMs: 2_500 + RECOVERY_QUIET_MS - 100, failures: 25 }]);
    expect(health.isDegraded).toBe(false);
  });

  it("a failure after the success keeps it degraded until the next success and quiet period", () => {
    health.failed(unavailable);
    health.succeeded();
    vi.advanceTimersByTime(RECOVERY_QUIET_MS / 2);
    health.failed(unavailable);
    vi.advanceTimersByTime(RECOVERY_QUIET_MS * 2);
    expect(recovered).toEqual([]); // no success since the last failure
    health.succeeded();
    vi.advanceTimersByTime(RECOVERY_QUIET_MS);
    expect(recovered).toHaveLength(1);
    expect(degraded).toHaveLength(1);
  });

  it("successes alone say nothing; a later run of failures is a new pair", () => {
    health.succeeded();
    vi.advanceTimersByTime(RECOVERY_QUIET_MS * 2);
    expect([degraded, recovered]).toEqual([[], []]);
    health.failed(unavailable);
    vi.advanceTimersByTime(RECOVERY_QUIET_MS);
    health.succeeded();
    expect(recovered).toHaveLength(1);
    health.failed(new GatewayUnreachableError("http://127.0.0.1:1", new Error("ECONNREFUSED")));
    vi.advanceTimersByTime(RECOVERY_QUIET_MS);
    health.succeeded();
    expect(degraded.map((d) => d.reason)).toEqual([
      "NATS: JetStream answered 503",
      "cannot reach the gateway at http://127.0.0.1:1 (Error: ECONNREFUSED)",
    ]);
    expect(recovered).toHaveLength(2);
  });

  it("the gateway's own failures are trouble; the application's and a peer's are not", () => {
    expect(isGatewayTrouble(unavailable)).toBe(true);
    expect(isGatewayTrouble(new AcpError("InternalError", "internal error"))).toBe(true);
    expect(isGatewayTrouble(new AcpError("NotFound", "no message x", { httpStatus: 503 }))).toBe(true);
    expect(isGatewayTrouble(new GatewayUnreachableError("http://127.0.0.1:1", new Error("x")))).toBe(true);
    expect(isGatewayTrouble(new AcpError("NotFound", "no message x"))).toBe(false);
    expect(isGatewayTrouble(new AcpError("Forbidden", "only the recipient settles x"))).toBe(false);
    expect(isGatewayTrouble(new AcpError("RateLimited", "slow down"))).toBe(false);
    expect(isGatewayTrouble(new Error("the handler threw"))).toBe(false);
  });
});
