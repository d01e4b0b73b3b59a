import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  AcpError,
  buildErrorResponse,
  buildRequest,
  buildResponse,
  ErrorCode,
  ReplayGuard,
  signMessage,
  verifyEnvelope,
} from "../../src/protocol/index.js";
import {
  acpErrorOf,
  alpha,
  alphaSigner,
  beta,
  betaSigner,
  keyRing,
  mutated,
  exampleRequest,
  senderOf,
} from "./fixtures.js";

const ring = keyRing(alpha, beta);
const SENT_AT = Date.parse("2026-02-14T14:30:00Z");
const clockAt = (ms: number) => () => ms;

function signedRequest(options: { at?: number; messageId?: string; to?: string } = {}) {
  const request = buildRequest(senderOf(alpha), options.to ?? "agent-beta", exampleRequest().params.body, {
    now: new Date(options.at ?? SENT_AT),
    messageId: options.messageId ?? "9b2f1d3e-0c4a-4e8b-a1f2-3c4d5e6f7a8b",
  });
  return signMessage(request, alphaSigner);
}

describe("verifyEnvelope: the receive pipeline", () => {
  it("accepts a genuine message, from text or parsed, and returns its headers and kid", () => {
    const signed = signedRequest();
    for (const input of [signed, JSON.stringify(signed)]) {
      const verified = verifyEnvelope(input, {
        resolveKey: ring,
        replay: new ReplayGuard({ now: clockAt(SENT_AT + 1000) }),
        expectedRecipient: "agent-beta",
      });
      expect(verified.kid).toBe(alphaSigner.kid);
      expect(verified.headers["message-id"]).toBe("9b2f1d3e-0c4a-4e8b-a1f2-3c4d5e6f7a8b");
      expect(verified.message).toEqual(signed);
    }
  });

  it("validates before it verifies: a malformed header is -32602 even when the signature is also bad", () => {
    const broken = mutated(signedRequest(), (m) => (m.params.headers.timestamp = "soon"));
    const err = acpErrorOf(() => verifyEnvelope(broken, { resolveKey: ring }));
    expect(err.code).toBe(ErrorCode.InvalidParams);
    expect(err.data.problems?.[0]?.path).toBe("/params/headers/timestamp");
  });

  it("invalid JSON text is -32700", () => {
    expect(acpErrorOf(() => verifyEnvelope("{not json", { resolveKey: ring })).code).toBe(
      ErrorCode.ParseError,
    );
  });

  it("an unsigned message is -32001, and one without routing headers -32602", () => {
    const { signature: _s, ...unsigned } = signedRequest();
    expect(acpErrorOf(() => verifyEnvelope(unsigned, { resolveKey: ring })).code).toBe(
      ErrorCode.SignatureMissing,
    );
    const unrouted = signMessage(exampleRequest(), alphaSigner);
    const err = acpErrorOf(() => verifyEnvelope(unrouted, { resolveKey: ring }));
    expect(err.code).toBe(ErrorCode.InvalidParams);
    expect(err.data.problems?.map((p) => p.path)).toEqual([
      "/params/headers/message-id",
      "/params/headers/recipient-id",
    ]);
  });

  it("a re-routed message (recipient-id changed after signing) is -32002", () => {
    const rerouted = mutated(signedRequest(), (m) => (m.params.headers["recipient-id"] = "agent-gamma"));
    const err = acpErrorOf(() =>
      verifyEnvelope(rerouted, { resolveKey: ring, expectedRecipient: "agent-gamma" }),
    );
    expect(err.code).toBe(ErrorCode.SignatureInvalid);
  });

  it("a genuine message delivered to the wrong agent is -32007 misrouted", () => {
    const err = acpErrorOf(() =>
      verifyEnvelope(signedRequest(), { resolveKey: ring, expectedRecipient: "agent-gamma" }),
    );
    expect(err.code).toBe(ErrorCode.Misrouted);
    expect(err.data.problems).toEqual([
      { path: "/params/headers/recipient-id", message: "expected agent-gamma" },
    ]);
  });

  it("a replayed message is -32005, naming the message-id", () => {
    const replay = new ReplayGuard({ now: clockAt(SENT_AT + 1000) });
    const signed = signedRequest();
    verifyEnvelope(signed, { resolveKey: ring, replay });
    const err = acpErrorOf(() => verifyEnvelope(JSON.stringify(signed), { resolveKey: ring, replay }));
    expect(err.code).toBe(ErrorCode.Replay);
    expect(err.data.problems?.[0]?.path).toBe("/params/headers/message-id");
  });

  it("a replay with a new message-id is caught by the signature instead (-32002)", () => {
    const replay = new ReplayGuard({ now: clockAt(SENT_AT) });
    const signed = signedRequest();
    verifyEnvelope(signed, { resolveKey: ring, replay });
    const renamed = mutated(
      signed,
      (m) => (m.params.headers["message-id"] = "9b2f1d3e-0c4a-4e8b-a1f2-000000000000"),
    );
    expect(acpErrorOf(() => verifyEnvelope(renamed, { resolveKey: ring, replay })).code).toBe(
      ErrorCode.SignatureInvalid,
    );
  });

  it.each([
    ["stale (6 minutes old)", SENT_AT - 6 * 60_000],
    ["from the future (6 minutes ahead)", SENT_AT + 6 * 60_000],
  ])("a timestamp %s is -32006", (_name, at) => {
    const replay = new ReplayGuard({ now: clockAt(SENT_AT) });
    const err = acpErrorOf(() => verifyEnvelope(signedRequest({ at }), { resolveKey: ring, replay }));
    expect(err.code).toBe(ErrorCode.StaleTimestamp);
    expect(err.data.problems?.[0]?.path).toBe("/params/headers/timestamp");
    expect(err.data.skewMs).toBe(300_000);
  });

  it("an unknown signer is -32003", () => {
    const err = acpErrorOf(() => verifyEnvelope(signedRequest(), { resolveKey: keyRing(beta) }));
    expect(err.code).toBe(ErrorCode.UnknownKey);
  });

  it("checks responses and signed error responses at their own header paths", () => {
    const request = signedRequest();
    const response = signMessage(
      buildResponse(
        senderOf(beta),
        request,
        { ok: true },
        { now: new Date(SENT_AT), messageId: "resp-0000001" },
      ),
      betaSigner,
    );
    const replay = new ReplayGuard({ now: clockAt(SENT_AT) });
    const verified = verifyEnvelope(response, { resolveKey: ring, replay, expectedRecipient: "agent-alpha" });
    expect("id" in verified.message && verified.message.id).toBe(request.id);
    expect(
      acpErrorOf(() => verifyEnvelope(response, { resolveKey: ring, replay })).data.problems?.[0]?.path,
    ).toBe("/result/headers/message-id");

    const failure = new AcpError("CapabilityMissing", "no calendar here");
    const errorResponse = signMessage(
      buildErrorResponse(senderOf(beta), request, failure, {
        now: new Date(SENT_AT),
        messageId: "err-00000001",
      }),
      betaSigner,
    );
    expect(verifyEnvelope(errorResponse, { resolveKey: ring, replay }).headers["recipient-id"]).toBe(
      "agent-alpha",
    );
    const misrouted = acpErrorOf(() =>
      verifyEnvelope(errorResponse, { resolveKey: ring, expectedRecipient: "agent-gamma" }),
    );
    expect(misrouted.data.problems?.[0]?.path).toBe("/error/data/headers/recipient-id");
  });
});

describe("tampering with any byte of the wire text is refused", () => {
  const wire = JSON.stringify(signedRequest());
  const options = () => ({ resolveKey: ring, replay: new ReplayGuard({ now: clockAt(SENT_AT) }) });

  function outcome(text: string): string {
    try {
      verifyEnvelope(text, options());
      return "accepted";
    } catch (err) {
      if (!(err instanceof AcpError)) throw err;
      return err.kind;
    }
  }

  it("the untouched text is accepted", () => {
    expect(outcome(wire)).toBe("accepted");
  });

  it("changing the byte at every position (each to a neighbouring printable character)", () => {
    const reasons = new Set<string>();
    for (let i = 0; i < wire.length; i++) {
      const code = wire.charCodeAt(i);
      const replacement = String.fromCharCode(code === 126 ? 125 : code + 1);
      const result = outcome(wire.slice(0, i) + replacement + wire.slice(i + 1));
      expect(result, `position ${i} (${wire.slice(Math.max(0, i - 10), i + 10)})`).not.toBe("accepted");
      reasons.add(result);
    }
    expect(reasons).toContain("SignatureInvalid");
  });

  it("any printable replacement at any position (fast-check)", () => {
    fc.assert(
      fc.property(fc.nat(wire.length - 1), fc.integer({ min: 32, max: 126 }), (i, code) => {
        fc.pre(wire.charCodeAt(i) !== code);
        const tampered = wire.slice(0, i) + String.fromCharCode(code) + wire.slice(i + 1);
        expect(outcome(tampered)).not.toBe("accepted");
      }),
      { numRuns: 500 },
    );
  });
});
