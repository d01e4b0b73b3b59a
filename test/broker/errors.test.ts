import { describe, expect, it } from "vitest";
import { BrokerError, type BrokerErrorKind, brokerToAcp } from "../../src/broker/index.js";
import { QUOTA_RETRY_AFTER_SECONDS } from "../../src/broker/errors.js";
import { AcpError } from "../../src/protocol/index.js";

const EXPECTED: Record<BrokerErrorKind, [string, number]> = {
  invalid_argument: ["InvalidParams", 400],
  not_found: ["NotFound", 404],
  forbidden: ["Forbidden", 403],
  conflict: ["Conflict", 409],
  exists: ["Conflict", 409],
  invalid_state: ["Conflict", 409],
  unavailable: ["StorageUnavailable", 503],
  closed: ["StorageUnavailable", 503],
  quota: ["RateLimited", 429],
};

describe("brokerToAcp", () => {
  it("turns every broker error into the ACP error clients see, never a 500", () => {
    for (const [code, [kind, status]] of Object.entries(EXPECTED)) {
      const mapped = brokerToAcp(new BrokerError(code as BrokerErrorKind, `${code} happened`));
      expect(mapped, code).toBeInstanceOf(AcpError);
      expect([(mapped as AcpError).kind, (mapped as AcpError).httpStatus], code).toEqual([kind, status]);
      expect((mapped as AcpError).message).toBe(`${code} happened`);
    }
  });

  it("tells a quota refusal which quota and when to retry", () => {
    const quota = { quota: "recipient-pending-messages" as const, limit: 10, used: 10 };
    const mapped = brokerToAcp(new BrokerError("quota", "the queue is full", { quota })) as AcpError;
    expect(mapped.data).toEqual({
      reason: "RateLimited",
      ...quota,
      retryAfterSeconds: QUOTA_RETRY_AFTER_SECONDS,
    });
  });

  it("knows a broker error by its class, not its name: anything else passes through unchanged", () => {
    const impostor = Object.assign(new Error("not from the broker"), {
      name: "BrokerError",
      kind: "not_found",
    });
    expect(brokerToAcp(impostor)).toBe(impostor);
    const acp = new AcpError("Timeout");
    expect(brokerToAcp(acp)).toBe(acp);
  });
});
