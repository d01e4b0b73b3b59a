import { describe, expect, it } from "vitest";
import {
  AcpError,
  buildAnnounce,
  buildCapabilities,
  buildErrorResponse,
  buildHandoff,
  buildNotification,
  buildRequest,
  buildResponse,
  messageKind,
  TRUST_LAYER_VERSION,
  validateMessage,
} from "../../src/protocol/index.js";
import { alpha, beta, senderOf } from "./fixtures.js";

const NOW = new Date("2026-02-14T14:30:00Z");
const from = senderOf(alpha, [0, 1, 2, 3]);

describe("message builders", () => {
  it("fill the six headers and the two routing headers, and the result is a valid envelope minus signature", () => {
    const request = buildRequest(from, "agent-beta", { action: "ping" }, { now: NOW });
    expect(request.params.headers).toEqual({
      "agent-id": "agent-alpha",
      "principal-id": "principal-a",
      timestamp: "2026-02-14T14:30:00.000Z",
      "message-type": "request",
      "trust-layer-version": TRUST_LAYER_VERSION,
      "skill-layers-loaded": [0, 1, 2, 3],
      "message-id": expect.stringMatching(/^[0-9a-f-]{36}$/),
      "recipient-id": "agent-beta",
    });
    expect(messageKind(validateMessage(request))).toBe("request");
  });

  it("give every message, notifications included, its own message-id", () => {
    const ids = new Set(
      Array.from(
        { length: 50 },
        () => buildNotification(from, "agent-beta", {}).params.headers["message-id"],
      ),
    );
    expect(ids.size).toBe(50);
  });

  it("a request's JSON-RPC id defaults to its message-id, and can be chosen", () => {
    const request = buildRequest(from, "agent-beta", {}, { messageId: "msg-00000042" });
    expect(request.id).toBe("msg-00000042");
    expect(buildRequest(from, "agent-beta", {}, { id: 7 }).id).toBe(7);
    expect(buildRequest(from, "agent-beta", {}, { method: "agent.command" }).method).toBe("agent.command");
  });

  it("a notification never carries an id", () => {
    for (const message of [
      buildNotification(from, "agent-beta", { status: "busy" }),
      buildAnnounce(from, "agent-beta", { capabilities: [], purpose: "test" }),
      buildCapabilities(from, "agent-beta", { tools: [], domains: [], limits: [], requests: [] }),
    ]) {
      expect(message).not.toHaveProperty("id");
      expect(message.params.headers["message-type"]).toBe("notification");
      expect(messageKind(validateMessage(message))).toBe("notification");
    }
  });

  it("a handoff is typed handoff and carries an id", () => {
    const handoff = buildHandoff(from, "agent-beta", { completed: "a", remaining: "b", context: {} });
    expect(handoff.params.headers["message-type"]).toBe("handoff");
    expect(handoff.id).toBe(handoff.params.headers["message-id"]);
    expect(messageKind(validateMessage(handoff))).toBe("handoff");
  });

  it("a response answers with the request's id and is addressed back to the requester", () => {
    const request = buildRequest(from, "agent-beta", {}, { id: "req-7f3a-4b2c-9d1e" });
    const response = buildResponse(senderOf(beta), request, { slots: [] });
    expect(response.id).toBe("req-7f3a-4b2c-9d1e");
    expect(response.result.headers["recipient-id"]).toBe("agent-alpha");
    expect(response.result.headers["message-id"]).not.toBe(request.params.headers["message-id"]);
    expect(messageKind(validateMessage(response))).toBe("response");
  });

  it("an agent's error response carries its headers in error.data.headers, next to the error's data", () => {
    const request = buildRequest(from, "agent-beta", {});
    const failure = new AcpError("CapabilityMissing", "no calendar here", { capability: "calendar" });
    const response = buildErrorResponse(senderOf(beta), request, failure);
    expect(response.id).toBe(request.id);
    expect(response.error).toMatchObject({
      code: -32022,
      message: "no calendar here",
      data: {
        reason: "CapabilityMissing",
        capability: "calendar",
        headers: { "recipient-id": "agent-alpha" },
      },
    });
    expect(messageKind(validateMessage(response, { envelope: false }))).toBe("error");
    const plain = buildErrorResponse(senderOf(beta), request, { code: -32601, message: "no such method" });
    expect(plain.error.data).toEqual({ headers: expect.objectContaining({ "agent-id": "agent-beta" }) });
  });
});
