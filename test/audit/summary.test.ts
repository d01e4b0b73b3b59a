import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AuditEntryInputSchema } from "../../src/audit/entry.js";
import { AuditEntrySchema, auditEntryFor, summarize, summaryOf } from "../../src/audit/index.js";
import { exampleRequest, exampleResponse, headers } from "./fixtures.js";

const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

const JWE =
  "eyJhbGciOiJFQ0RILUVTIiwiZW5jIjoiQTI1NkdDTSJ9.ZW5jcnlwdGVka2V5.aXZpdml2aXY.U0VDUkVUUEFZTE9BRE1FRElDQUw.dGFndGFndGFn";

function notification(method: string, body: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    jsonrpc: "2.0",
    method,
    params: { headers: headers("agent-alpha", "principal-a", "notification", extra), body },
  };
}

describe("summarize", () => {
  it("describes a request with an action and its parameters", () => {
    expect(summarize(exampleRequest())).toBe(
      "agent-alpha asked agent-beta for get-availability (date_range: 2026-02-17/2026-02-21, duration_minutes: 60)",
    );
  });

  it("describes a request without an action by its fields", () => {
    const message = {
      ...exampleRequest(),
      params: { ...exampleRequest().params, body: { question: "Lunch?", urgent: true } },
    };
    expect(summarize(message)).toBe("agent-alpha sent agent-beta a request (question: Lunch?, urgent: true)");
  });

  it("describes a response as an answer to what was asked, never by the request's id", () => {
    expect(summarize(exampleResponse(), { context: { inReplyTo: "get-availability" } })).toBe(
      "agent-beta answered agent-alpha's get-availability: 3 slots",
    );
    expect(summarize(exampleResponse())).toBe("agent-beta answered agent-alpha's request: 3 slots");
    const one = {
      ...exampleResponse(),
      result: { ...exampleResponse().result, body: { open_items: ["x"] } },
    };
    expect(summarize(one)).toBe("agent-beta answered agent-alpha's request: 1 item");
    const fields = {
      ...exampleResponse(),
      result: { ...exampleResponse().result, body: { booked: true, room: "B2" } },
    };
    expect(summarize(fields)).toBe("agent-beta answered agent-alpha's request: booked: true, room: B2");
    const empty = { ...exampleResponse(), result: { ...exampleResponse().result, body: {} } };
    expect(summarize(empty, { context: { inReplyTo: "book" } })).toBe(
      "agent-beta answered agent-alpha's book",
    );
    expect(summarize(exampleResponse())).not.toContain("req-7f3a");
  });

  it("describes an error response by code and message", () => {
    const error = { jsonrpc: "2.0", error: { code: -32001, message: "handshake required" }, id: "req-9" };
    expect(summarize(error)).toBe("The sender answered a request with error -32001: handshake required");
  });

  it("describes negotiation offers by their terms and round, and a vote's result by its tally", () => {
    const offer = (method: string, body: Record<string, unknown>) => ({
      jsonrpc: "2.0",
      method,
      params: { headers: headers("beta", "principal-b", "request", { "recipient-id": "alpha" }), body },
      id: "n-1",
    });
    const counter = offer("agent.negotiation.counter", { sessionId: "s1", round: 2, terms: { price: 80 } });
    expect(summarize(counter, { context: { maxRounds: 10 } })).toBe(
      "beta countered with price 80 (round 2 of 10)",
    );
    expect(summarize(counter)).toBe("beta countered with price 80 (round 2)");
    const propose = offer("agent.negotiation.propose", {
      sessionId: "s1",
      subject: "GPU hours",
      round: 1,
      terms: { price: 100, hours: 10 },
    });
    expect(summarize(propose, { context: { maxRounds: 10 } })).toBe(
      'beta proposed "GPU hours" to alpha: price 100, hours 10 (round 1 of 10)',
    );
    expect(summarize(offer("agent.negotiation.accept", { sessionId: "s1", round: 3 }))).toBe(
      "beta accepted alpha's offer (round 3); both have signed the agreement",
    );
    const result = offer("agent.vote.result", {
      voteId: "v1",
      result: { outcome: "decided", winner: "yes", tally: { yes: 3, no: 0 } },
    });
    expect(summarize(result, { context: { question: "Ship on Friday?" } })).toBe(
      "the vote 'Ship on Friday?' closed: yes 3, no 0",
    );
    const tie = offer("agent.vote.result", {
      voteId: "v1",
      result: { outcome: "undecided", winner: null, tally: { yes: 1, no: 1 } },
    });
    expect(summarize(tie)).toBe("the vote 'v1' closed: yes 1, no 1; undecided");
    const handoff = offer("agent.handoff", {
      completed: "drafted",
      remaining: "translate",
      context: {},
      task: { handoffId: "h1", title: "Translate the report", requires: [], escrow: 50 },
    });
    expect(summarize(handoff)).toBe(
      'beta handed alpha a task "Translate the report" with 50 credits in escrow: completed drafted; remaining translate',
    );
    expect(summarize(offer("agent.handoff.decline", { handoffId: "h1", reason: "busy" }))).toBe(
      "beta declined alpha's task: busy",
    );
  });

  it("describes the core protocol's example announce", () => {
    const announce = notification("agent.announce", {
      capabilities: ["calendar-management", "document-retrieval"],
      purpose: "Coordinate scheduling between principals",
    });
    expect(summarize(announce)).toBe(
      'agent-alpha introduced itself: "Coordinate scheduling between principals"; capabilities: calendar-management, document-retrieval',
    );
  });

  it("describes a capabilities exchange", () => {
    const capabilities = notification("agent.capabilities", {
      tools: ["calendar.read", { name: "calendar.write", description: "books slots" }],
      domains: ["scheduling"],
      limits: { max_requests_per_hour: 60 },
      requests: ["availability"],
    });
    expect(summarize(capabilities)).toBe(
      "agent-alpha shared its capabilities: tools calendar.read, calendar.write; domains scheduling; limits {max_requests_per_hour}; requests availability",
    );
  });

  it("describes a notification by its message", () => {
    expect(
      summarize(
        notification("agent.notification", { status: "done", message: "Booked the room\nfor Tuesday" }),
      ),
    ).toBe("agent-alpha sent a notification: Booked the room for Tuesday");
  });

  it("describes a handoff by what was completed and what remains", () => {
    const handoff = {
      jsonrpc: "2.0",
      method: "agent.handoff",
      params: {
        headers: headers("agent-alpha", "principal-a", "handoff"),
        body: {
          completed: ["found 3 slots", "asked principal-a"],
          remaining: "confirm a slot with principal-b",
          context: { slots: ["2026-02-18T10:00:00Z"] },
        },
      },
      id: "handoff-1",
    };
    expect(summarize(handoff)).toBe(
      "agent-alpha handed a task: completed found 3 slots, asked principal-a; remaining confirm a slot with principal-b",
    );
  });

  it("describes an unknown agent.* method generically", () => {
    expect(summarize(notification("agent.ping", { n: 1 }))).toBe("agent-alpha sent agent.ping (n: 1)");
  });

  it("says only that an encrypted exchange happened, ignoring any given summary", () => {
    const encrypted = { ...exampleRequest(), params: { ...exampleRequest().params, body: { jwe: JWE } } };
    const summary = summarize(encrypted, { summary: "Asked about the medical appointment" });
    expect(summary).toBe(
      "agent-alpha sent agent-beta an end-to-end encrypted request; the payload is not shown",
    );
    for (const part of JWE.split(".")) expect(summary).not.toContain(part);
    const response = {
      ...exampleResponse("req-5"),
      result: { ...exampleResponse().result, body: { jwe: JWE } },
    };
    expect(summarize(response)).toBe(
      "agent-beta sent agent-alpha an end-to-end encrypted response; the payload is not shown",
    );
    // A summary header on an encrypted message is not shown either.
    const withHeader = {
      ...encrypted,
      params: {
        ...encrypted.params,
        headers: { ...encrypted.params.headers, summary: "Medical appointment" },
      },
    };
    expect(summaryOf(withHeader)).toEqual({
      text: "agent-alpha sent agent-beta an end-to-end encrypted request; the payload is not shown",
      by: "generated",
    });
  });

  it("uses the summary the sender signed into the summary header, as the sender's words", () => {
    const signed = {
      ...exampleRequest(),
      params: {
        ...exampleRequest().params,
        headers: { ...exampleRequest().params.headers, summary: "Asked for free slots next week" },
      },
    };
    expect(summaryOf(signed)).toEqual({ text: "Asked for free slots next week", by: "sender" });
    expect(summaryOf(exampleRequest()).by).toBe("generated");
    expect(auditEntryFor(signed, { direction: "sent", channel: "c" })).toMatchObject({
      summary: "Asked for free slots next week",
      summaryBy: "sender",
    });
    expect(auditEntryFor(exampleRequest(), { direction: "sent", channel: "c" }).summaryBy).toBeUndefined();
  });

  it("uses the sender's summary, given as an option or in the body, cleaned up", () => {
    expect(
      summarize(exampleRequest(), { summary: "  Requested available meeting\ttimes\n for next week " }),
    ).toBe("Requested available meeting times for next week");
    const withSummary = notification("agent.notification", { summary: "Shared the agenda", agenda: ["a"] });
    expect(summarize(withSummary)).toBe("Shared the agenda");
    expect(summarize(withSummary, { summary: "   " })).toBe("Shared the agenda");
  });

  it("makes one line of any whitespace, in the given summary and in field values", () => {
    for (const [given, expected] of [
      [" leading", "leading"],
      ["trailing ", "trailing"],
      ["two  spaces", "two spaces"],
      ["no\u00a0break", "no break"],
      ["line\u2028separator", "line separator"],
      ["ideographic\u3000space", "ideographic space"],
      ["bell\u0007char", "bell char"],
      ["already clean", "already clean"],
    ] as const) {
      expect(summarize(exampleRequest(), { summary: given })).toBe(expected);
    }
    expect(summarize(notification("agent.notification", { detail: "a\u00a0 b", short: "eyJ.x" }))).toBe(
      "agent-alpha sent a notification (detail: a b, short: [redacted])",
    );
  });

  it("redacts fields and words that look like secrets", () => {
    const message = notification("agent.notification", {
      api_key: "hunter2",
      password: "correct horse",
      token: "abc",
      session: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
      id: "550e8400-e29b-41d4-a716-446655440000",
    });
    const summary = summarize(message);
    expect(summary).toBe(
      "agent-alpha sent a notification (api_key: [redacted], password: [redacted], token: [redacted], session: [redacted] (+1 more))",
    );
    expect(summarize(exampleRequest(), { summary: "Sent key sk-live_0123456789abcdef to beta" })).toBe(
      "Sent key [redacted] to beta",
    );
  });

  it("shortens long values and the whole summary", () => {
    const long = "x".repeat(500);
    const summary = summarize(notification("agent.notification", { detail: long, more: long, extra: long }));
    expect(summary.length).toBeLessThanOrEqual(240);
    expect(summary).toContain("detail: xxxxxxxx");
    expect(summary).toContain("…");
    expect(summarize(exampleRequest(), { summary: "y".repeat(1000) })).toHaveLength(240);
  });

  it("never splits a surrogate pair and replaces lone surrogates", () => {
    const summary = summarize(exampleRequest(), { summary: `${"😀".repeat(300)}` });
    expect(isWellFormed(summary)).toBe(true);
    expect(summarize(exampleRequest(), { summary: "bad \ud800 half" })).toBe("bad \ufffd half");
  });

  it("copes with things that are not ACP messages", () => {
    expect(summarize(null)).toBe("The sender sent a message");
    expect(summarize({ method: 42, params: "x" })).toBe("The sender sent a message");
  });

  it("is always one short, well-formed line without the encrypted payload (property)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.option(fc.string()), (body, given) => {
        const message = {
          ...exampleRequest(),
          params: { ...exampleRequest().params, body: { jwe: JWE, other: body } },
        };
        const encrypted = summarize(message, given === null ? {} : { summary: given });
        expect(encrypted).not.toContain(JWE.slice(0, 20));
        expect(encrypted).toContain("encrypted");
        const plain = summarize(
          { ...exampleRequest(), params: { ...exampleRequest().params, body: { data: body } } },
          {
            summary: given ?? undefined,
          },
        );
        for (const summary of [encrypted, plain]) {
          expect(Array.from(summary).length).toBeLessThanOrEqual(240);
          expect(summary).not.toMatch(/\p{Cc}/u);
          expect(isWellFormed(summary)).toBe(true);
        }
      }),
    );
  });
});

describe("auditEntryFor", () => {
  it("builds a sent request's entry with the peer's principal", () => {
    const entry = auditEntryFor(
      {
        ...exampleRequest(),
        params: {
          ...exampleRequest().params,
          headers: { ...exampleRequest().params.headers, "message-id": "msg-0001-abcd" },
        },
      },
      { direction: "sent", channel: "nats:agent.agent-beta.inbox", peer: { principal: "principal-b" } },
    );
    expect(entry).toEqual({
      direction: "sent",
      from: { agent: "agent-alpha", principal: "principal-a" },
      to: { agent: "agent-beta", principal: "principal-b" },
      type: "request",
      method: "agent.request",
      id: "req-7f3a-4b2c-9d1e",
      messageId: "msg-0001-abcd",
      summary:
        "agent-alpha asked agent-beta for get-availability (date_range: 2026-02-17/2026-02-21, duration_minutes: 60)",
      channel: "nats:agent.agent-beta.inbox",
    });
    expect(AuditEntryInputSchema.safeParse(entry).success).toBe(true);
  });

  it("builds a received response's entry with the local principal", () => {
    expect(
      auditEntryFor(exampleResponse(), {
        direction: "received",
        channel: "nats:agent.agent-alpha.inbox",
        self: { agent: "agent-alpha", principal: "principal-a" },
      }),
    ).toMatchObject({
      direction: "received",
      from: { agent: "agent-beta", principal: "principal-b" },
      to: { agent: "agent-alpha", principal: "principal-a" },
      type: "response",
      method: "agent.response",
      id: "req-7f3a-4b2c-9d1e",
    });
  });

  it("reads a signed error response's headers from error.data.headers, as the gateway relays it", () => {
    const errorResponse = {
      jsonrpc: "2.0",
      id: "req-7f3a-4b2c-9d1e",
      error: {
        code: -32021,
        message: "permission denied",
        data: {
          headers: headers("agent-beta", "principal-b", "response", {
            "recipient-id": "agent-alpha",
            "message-id": "err-0001-abcd",
          }),
        },
      },
    };
    expect(
      auditEntryFor(errorResponse, {
        direction: "sent",
        channel: "embedded:agent.agent-alpha.inbox",
        peer: { principal: "principal-a" },
      }),
    ).toMatchObject({
      from: { agent: "agent-beta", principal: "principal-b" },
      to: { agent: "agent-alpha", principal: "principal-a" },
      type: "response",
      messageId: "err-0001-abcd",
      error: { code: -32021, message: "permission denied" },
    });
  });

  it("takes a notification's id from its message-id and marks handshake steps", () => {
    const announce = notification(
      "agent.announce",
      { capabilities: [], purpose: "hello" },
      { "message-id": "ann-0001-abcd", "recipient-id": "agent-beta" },
    );
    const entry = auditEntryFor(announce, { direction: "sent", channel: "nats:agent.agent-beta.inbox" });
    expect(entry).toMatchObject({
      type: "notification",
      id: "ann-0001-abcd",
      step: "announce",
      to: { principal: null },
    });
    expect(entry.messageId).toBeUndefined();
    const verified = auditEntryFor(announce, {
      direction: "received",
      channel: "nats:agent.agent-beta.inbox",
      step: "verify",
      error: { code: -32002, message: "bad signature" },
    });
    expect(verified).toMatchObject({ step: "verify", error: { code: -32002, message: "bad signature" } });
  });

  it("marks an encrypted message and an error response", () => {
    const encrypted = { ...exampleRequest(), params: { ...exampleRequest().params, body: { jwe: JWE } } };
    const entry = auditEntryFor(encrypted, { direction: "sent", channel: "c" });
    expect(entry.encrypted).toBe(true);
    expect(JSON.stringify(entry)).not.toContain(JWE.split(".")[3]);
    const error = { jsonrpc: "2.0", error: { code: -32001, message: "handshake required" }, id: "req-9" };
    expect(
      auditEntryFor(error, {
        direction: "received",
        channel: "c",
        self: { agent: "agent-alpha", principal: "principal-a" },
        peer: { agent: "agent-beta", principal: "principal-b" },
      }),
    ).toMatchObject({
      from: { agent: "agent-beta", principal: "principal-b" },
      to: { agent: "agent-alpha", principal: "principal-a" },
      type: "response",
      method: "agent.response",
      id: "req-9",
      error: { code: -32001, message: "handshake required" },
    });
  });

  it("says which party it cannot name", () => {
    const error = { jsonrpc: "2.0", error: { code: -32600, message: "invalid" }, id: null };
    expect(() => auditEntryFor(error, { direction: "received", channel: "c" })).toThrow(
      "cannot tell who sent this message: no agent-id header and no peer.agent",
    );
    expect(() =>
      auditEntryFor(notification("agent.notification", {}), { direction: "sent", channel: "c" }),
    ).toThrow("cannot tell who received this message: no recipient-id header and no peer.agent");
    expect(() =>
      auditEntryFor(
        { jsonrpc: "2.0", method: "agent.custom", params: { headers: {}, body: {} } },
        {
          direction: "sent",
          channel: "c",
          self: { agent: "a" },
          peer: { agent: "b" },
        },
      ),
    ).toThrow("cannot tell the message type of agent.custom");
  });
});

describe("AuditEntrySchema", () => {
  it("accepts the core protocol's example entry once chained", () => {
    const exampleEntry = {
      ts: "2026-02-14T12:05:00Z",
      direction: "sent",
      from: { agent: "agent-alpha", principal: "principal-a" },
      to: { agent: "agent-beta", principal: "principal-b" },
      type: "request",
      method: "agent.request",
      id: "550e8400-e29b-41d4-a716-446655440000",
      summary: "Requested available meeting times for next week",
      channel: "nats:agent.agent-beta.inbox",
      discord_summary: true,
    };
    expect(
      AuditEntrySchema.safeParse({ ...exampleEntry, seq: 1, prev: "0".repeat(64), hash: "a".repeat(64) })
        .success,
    ).toBe(true);
    expect(AuditEntrySchema.safeParse(exampleEntry).success).toBe(false);
  });
});
