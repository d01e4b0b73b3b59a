import { describe, expect, it } from "vitest";
import {
  ErrorCode,
  headersOf,
  messageKind,
  parseMessageText,
  validateMessage,
} from "../../src/protocol/index.js";
import {
  acpErrorOf,
  mutated,
  problemPaths,
  sampleHandoff,
  exampleAnnounce,
  exampleRequest,
  exampleResponse,
} from "./fixtures.js";

type Json = Record<string, unknown>;
const headersOfMethod = (m: Json) => (m.params as { headers: Json }).headers;
const bodyOfMethod = (m: Json) => (m.params as { body: Json }).body;

/** Validates and expects a rejection with `code`, listing a problem at exactly `path`. */
function expectRejected(input: unknown, code: number, path: string, options = {}) {
  const err = acpErrorOf(() => validateMessage(input, options));
  expect(err.code).toBe(code);
  expect(problemPaths(err)).toContain(path);
  expect(err.toJSON()).toMatchObject({
    code,
    message: expect.any(String),
    data: { problems: expect.any(Array) },
  });
  return err;
}

describe("the core protocol's own examples", () => {
  it.each([
    ["announce (section 3.1)", exampleAnnounce(), "notification", "agent-alpha"],
    ["request (section 8)", exampleRequest(), "request", "agent-alpha"],
    ["response (section 8)", exampleResponse(), "response", "agent-beta"],
    ["a handoff with completed, remaining and context", sampleHandoff(), "handoff", "agent-alpha"],
  ])("%s validates", (_name, message, kind, from) => {
    const valid = validateMessage(message);
    expect(messageKind(valid)).toBe(kind);
    expect(headersOf(valid)?.["agent-id"]).toBe(from);
  });

  it("returns the very object it checked (no copy, no stripped members)", () => {
    const request = { ...exampleRequest(), extension: { x: 1 } };
    expect(validateMessage(request)).toBe(request);
  });
});

const SIX_HEADERS = [
  "agent-id",
  "principal-id",
  "timestamp",
  "message-type",
  "trust-layer-version",
  "skill-layers-loaded",
];

describe("missing headers are rejected before any processing (-32602)", () => {
  it.each(SIX_HEADERS)("request without %s", (name) => {
    const err = expectRejected(
      mutated(exampleRequest(), (m) => delete headersOfMethod(m)[name]),
      ErrorCode.InvalidParams,
      `/params/headers/${name}`,
    );
    expect(err.data.problems).toContainEqual({ path: `/params/headers/${name}`, message: "is required" });
  });

  it.each(SIX_HEADERS)("response without %s", (name) => {
    expectRejected(
      mutated(exampleResponse(), (m) => delete m.result.headers[name]),
      ErrorCode.InvalidParams,
      `/result/headers/${name}`,
    );
  });

  it.each(SIX_HEADERS)("announce without %s", (name) => {
    expectRejected(
      mutated(exampleAnnounce(), (m) => delete m.params.headers[name]),
      ErrorCode.InvalidParams,
      `/params/headers/${name}`,
    );
  });

  it("lists every problem at once, each with its own pointer", () => {
    const err = expectRejected(
      mutated(exampleRequest(), (m) => {
        delete m.params.headers["agent-id"];
        m.params.headers.timestamp = "yesterday";
      }),
      ErrorCode.InvalidParams,
      "/params/headers/agent-id",
    );
    expect(problemPaths(err).sort()).toEqual(["/params/headers/agent-id", "/params/headers/timestamp"]);
  });

  it("a message without headers at all", () => {
    expectRejected(
      mutated(exampleRequest(), (m) => delete (m.params as Partial<Json>).headers),
      ErrorCode.InvalidParams,
      "/params/headers",
    );
  });

  it("headers that are not an object", () => {
    expectRejected(
      mutated(exampleRequest(), (m) => ((m.params as Json).headers = ["agent-alpha"])),
      ErrorCode.InvalidParams,
      "/params/headers",
    );
  });
});

describe("malformed headers are rejected (-32602), naming the header", () => {
  it.each<[string, unknown, string]>([
    ["agent-id", 42, ""],
    ["agent-id", "agent.alpha", ""],
    ["agent-id", "", ""],
    ["principal-id", "", ""],
    ["principal-id", "principal a", ""],
    ["principal-id", 7, ""],
    ["timestamp", "yesterday", ""],
    ["timestamp", "2026-02-14", ""],
    ["timestamp", "2026-02-14T14:30:00", ""],
    ["timestamp", 1771079400000, ""],
    ["message-type", "query", ""],
    ["message-type", "Request", ""],
    ["trust-layer-version", "1.0", ""],
    ["trust-layer-version", "v1.0.0", ""],
    ["trust-layer-version", 1, ""],
    ["skill-layers-loaded", "0,1", ""],
    ["skill-layers-loaded", [0, -1], "/1"],
    ["skill-layers-loaded", [0, 1.5], "/1"],
    ["skill-layers-loaded", ["1"], "/0"],
    ["message-id", "short", ""],
    ["message-id", "has space in it", ""],
    ["recipient-id", "agent.beta", ""],
  ])("%s = %j", (name, value, suffix) => {
    expectRejected(
      mutated(exampleRequest(), (m) => (m.params.headers[name] = value)),
      ErrorCode.InvalidParams,
      `/params/headers/${name}${suffix}`,
    );
  });

  it("accepts an offset timestamp, fractional seconds, a pre-release version and unknown extra headers", () => {
    const message = mutated(exampleRequest(), (m) => {
      m.params.headers.timestamp = "2026-02-14T15:30:00.123+01:00";
      m.params.headers["trust-layer-version"] = "1.1.0-rc.1";
      m.params.headers["x-trace"] = "abc";
      m.params.headers["skill-layers-loaded"] = [];
    });
    expect(() => validateMessage(message)).not.toThrow();
  });
});

describe("id rules (-32600 at /id)", () => {
  it("a notification with an id", () => {
    const notification = {
      ...exampleRequest(),
      method: "agent.notification",
      params: {
        ...exampleRequest().params,
        headers: { ...exampleRequest().params.headers, "message-type": "notification" },
      },
    };
    const err = expectRejected(notification, ErrorCode.InvalidRequest, "/id");
    expect(err.data.problems?.find((p) => p.path === "/id")?.message).toMatch(
      /notification.*must not have an id/,
    );
  });

  it.each(["agent.announce", "agent.capabilities"])("%s with an id", (method) => {
    expectRejected({ ...exampleAnnounce(), method, id: "x-1" }, ErrorCode.InvalidRequest, "/id");
  });

  it("a request without an id", () => {
    const err = expectRejected(
      mutated(exampleRequest(), (m) => delete (m as Partial<Json>).id),
      ErrorCode.InvalidRequest,
      "/id",
    );
    expect(err.data.problems?.[0]?.message).toMatch(/unique id/);
  });

  it("a handoff without an id", () => {
    expectRejected(
      mutated(sampleHandoff(), (m) => delete (m as Partial<Json>).id),
      ErrorCode.InvalidRequest,
      "/id",
    );
  });

  it("a response without an id (it must reference the request's id)", () => {
    const err = expectRejected(
      mutated(exampleResponse(), (m) => delete (m as Partial<Json>).id),
      ErrorCode.InvalidRequest,
      "/id",
    );
    expect(err.data.problems).toContainEqual({ path: "/id", message: "is required" });
  });

  it.each<[string, unknown]>([
    ["null", null],
    ["an empty string", ""],
    ["a boolean", true],
    ["a fraction", 1.5],
    ["an object", { id: 1 }],
  ])("a request whose id is %s", (_name, id) => {
    expectRejected({ ...exampleRequest(), id }, ErrorCode.InvalidRequest, "/id");
  });

  it("accepts integer ids", () => {
    expect(() => validateMessage({ ...exampleRequest(), id: 7 })).not.toThrow();
    expect(() => validateMessage({ ...exampleResponse(), id: 7 })).not.toThrow();
  });
});

describe("handoff bodies must say what is completed, what remains, and the context (-32602)", () => {
  it.each(["completed", "remaining", "context"])("a handoff without %s", (part) => {
    const err = expectRejected(
      mutated(sampleHandoff(), (m) => delete m.params.body[part]),
      ErrorCode.InvalidParams,
      `/params/body/${part}`,
    );
    expect(err.data.problems).toEqual([{ path: `/params/body/${part}`, message: "is required" }]);
  });

  it.each<[string, unknown]>([
    ["completed", ""],
    ["remaining", []],
    ["context", "see above"],
  ])("a handoff whose %s is empty or of the wrong kind", (part, value) => {
    expectRejected(
      mutated(sampleHandoff(), (m) => (m.params.body[part] = value)),
      ErrorCode.InvalidParams,
      `/params/body/${part}`,
    );
  });

  it("an end-to-end encrypted handoff body is exactly {jwe}", () => {
    const jwe = "eyJhbGciOiJFQ0RILUVTIn0..aXY.Y2lwaGVy.dGFn";
    expect(() =>
      validateMessage({ ...sampleHandoff(), params: { ...sampleHandoff().params, body: { jwe } } }),
    ).not.toThrow();
    expectRejected(
      mutated(sampleHandoff(), (m) => (m.params.body = { jwe: "not a jwe" })),
      ErrorCode.InvalidParams,
      "/params/body/jwe",
    );
    expectRejected(
      mutated(sampleHandoff(), (m) => (m.params.body = { jwe, completed: "x" })),
      ErrorCode.InvalidParams,
      "/params/body",
    );
  });
});

describe("handshake message bodies (-32602)", () => {
  it.each(["capabilities", "purpose"])("an announce without %s", (part) => {
    expectRejected(
      mutated(exampleAnnounce(), (m) => delete m.params.body[part]),
      ErrorCode.InvalidParams,
      `/params/body/${part}`,
    );
  });

  it.each(["tools", "domains", "limits", "requests"])("a capabilities message without %s", (part) => {
    const capabilities = mutated(exampleAnnounce(), (m) => {
      m.method = "agent.capabilities";
      m.params.body = {
        tools: ["calendar"],
        domains: ["scheduling"],
        limits: [],
        requests: ["availability"],
      };
    });
    expect(() => validateMessage(capabilities)).not.toThrow();
    expectRejected(
      mutated(capabilities, (m) => delete bodyOfMethod(m)[part]),
      ErrorCode.InvalidParams,
      `/params/body/${part}`,
    );
  });
});

describe("message-type must agree with the message (-32602)", () => {
  it.each<[string, () => Json, string, string]>([
    ["a request declaring notification", exampleRequest, "notification", "/params/headers/message-type"],
    ["a request declaring handoff", exampleRequest, "handoff", "/params/headers/message-type"],
    ["a handoff declaring request", sampleHandoff, "request", "/params/headers/message-type"],
    ["an announce declaring request", exampleAnnounce, "request", "/params/headers/message-type"],
    ["a response declaring request", exampleResponse, "request", "/result/headers/message-type"],
  ])("%s", (_name, make, declared, path) => {
    const message = make();
    const headers =
      "result" in message ? (message.result as { headers: Json }).headers : headersOfMethod(message);
    headers["message-type"] = declared;
    const err = expectRejected(message, ErrorCode.InvalidParams, path);
    expect(err.data.problems).toHaveLength(1);
  });

  it("an extension method is a request with an id and a notification without", () => {
    const command = { ...exampleRequest(), method: "agent.command" };
    expect(messageKind(validateMessage(command))).toBe("request");
    expectRejected(
      mutated(command as Json, (m) => delete m.id),
      ErrorCode.InvalidParams,
      "/params/headers/message-type",
    );
  });
});

describe("JSON-RPC structure (-32600 / -32700)", () => {
  it.each<[string, unknown]>([
    ["an array", [exampleRequest()]],
    ["a string", "agent.request"],
    ["a number", 42],
    ["null", null],
  ])("a message that is %s, not an object", (_name, input) => {
    const err = expectRejected(input, ErrorCode.InvalidRequest, "");
    expect(err.message).toMatch(/must be a JSON object/);
  });

  it("invalid JSON is the parse error -32700", () => {
    const err = acpErrorOf(() => parseMessageText('{"jsonrpc": "2.0", "method": '));
    expect(err.code).toBe(ErrorCode.ParseError);
    expect(problemPaths(err)).toEqual([""]);
  });

  it.each<[string, (m: Json) => void, string]>([
    ["jsonrpc is not 2.0", (m) => (m.jsonrpc = "1.0"), "/jsonrpc"],
    ["jsonrpc is missing", (m) => delete m.jsonrpc, "/jsonrpc"],
    ["the method is not agent.<name>", (m) => (m.method = "tools/call"), "/method"],
    ["the method is not a string", (m) => (m.method = 5), "/method"],
    ["params has an unknown member", (m) => ((m.params as Json).extra = 1), "/params"],
    ["params is missing", (m) => delete m.params, "/params"],
    ["it has both method and result", (m) => (m.result = {}), ""],
    ["it has none of method, result or error", (m) => delete m.method, ""],
    ["the signature is not a detached JWS", (m) => (m.signature = "abc"), "/signature"],
  ])("%s", (_name, change, path) => {
    expectRejected(mutated(exampleRequest() as Json, change), ErrorCode.InvalidRequest, path);
  });
});

describe("relayed envelopes ({envelope: true})", () => {
  const routed = () =>
    mutated(exampleRequest(), (m) => {
      m.params.headers["message-id"] = "550e8400-e29b-41d4-a716-446655440000";
      m.params.headers["recipient-id"] = "agent-beta";
      (m as Json).signature = "eyJhbGciOiJFZERTQSJ9..c2ln";
    });

  it("accepts a routed, signed message (the signature itself is checked by verify)", () => {
    expect(() => validateMessage(routed(), { envelope: true })).not.toThrow();
  });

  it.each(["message-id", "recipient-id"])("requires the %s header", (name) => {
    const err = expectRejected(
      mutated(routed(), (m) => delete m.params.headers[name]),
      ErrorCode.InvalidParams,
      `/params/headers/${name}`,
      { envelope: true },
    );
    expect(err.data.problems?.[0]?.message).toMatch(/relayed envelope/);
    expect(() => validateMessage(mutated(routed(), (m) => delete m.params.headers[name]))).not.toThrow();
  });

  it("requires a signature (-32001)", () => {
    expectRejected(
      mutated(routed(), (m) => delete (m as Partial<Json>).signature),
      ErrorCode.SignatureMissing,
      "/signature",
      { envelope: true },
    );
  });

  it("requires an error response to carry its signed headers in error.data.headers", () => {
    const error = { jsonrpc: "2.0", error: { code: -32601, message: "no such method" }, id: "req-1" };
    expect(() => validateMessage(error)).not.toThrow();
    expectRejected(
      { ...error, signature: "eyJhbGciOiJFZERTQSJ9..c2ln" },
      ErrorCode.InvalidParams,
      "/error/data/headers",
      {
        envelope: true,
      },
    );
  });

  it("checks the headers of an error response like any other", () => {
    const headers = { ...routed().params.headers, "message-type": "response" };
    const error = { jsonrpc: "2.0", error: { code: -32601, message: "no", data: { headers } }, id: "req-1" };
    expect(() => validateMessage(error)).not.toThrow();
    expectRejected(
      mutated(error, (m) => delete (m.error.data.headers as Json).timestamp),
      ErrorCode.InvalidParams,
      "/error/data/headers/timestamp",
    );
    expectRejected(
      mutated(error, (m) => (m.error.data.headers["message-type"] = "notification")),
      ErrorCode.InvalidParams,
      "/error/data/headers/message-type",
    );
  });
});
