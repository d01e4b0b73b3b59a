import { expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { readAudit, verifyAudit } from "../../src/audit/index.js";
import { GatewayClient, SdkError } from "../../src/client/index.js";
import { AcpError, ErrorCode } from "../../src/protocol/index.js";
import { agentFor, deferred, eventually, type GatewayFactory } from "./fixtures.js";
import { useTestbed } from "./testbed.js";

/**
 * The SDK's messaging against a real gateway over HTTP and WebSocket: handshake, request/response,
 * notifications, handoffs, errors, timeouts, encryption, audit, presence. Written against a gateway
 * factory so the same tests run on each broker (embedded SQLite, NATS JetStream).
 */
export function messagingSuite(makeGateway: GatewayFactory): void {
  const t = useTestbed(makeGateway);

  it("completes the four-step handshake, then a request gets its signed response", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const seen: string[] = [];
    alice.on("handshake", (e) => seen.push(`${e.step}:${e.direction}`));
    bob.onRequest(async (body, context) => ({
      available_slots: ["2026-02-18T10:00:00Z"],
      asked: body.action,
      by: `${context.from}/${context.principalId}`,
    }));
    expect(alice.handshakeState("bob-assistant")).toBe("none");
    const record = await alice.handshake("bob-assistant");
    expect(record).toMatchObject({ state: "established", principalId: "bob", commonLayers: [0, 1] });
    expect(seen).toEqual([
      "announce:sent",
      "announce:received",
      "verify:local",
      "capabilities:sent",
      "capabilities:received",
      "trust:local",
    ]);
    await eventually(() => bob.handshakeState("alice-assistant") === "established", "bob is established");
    expect(bob.trust("alice-assistant")?.level).toBe("baseline");

    const response = await alice.request("bob-assistant", { action: "get-availability" });
    expect(response).toEqual({
      available_slots: ["2026-02-18T10:00:00Z"],
      asked: "get-availability",
      by: "alice-assistant/alice",
    });
    expect(alice.trust("bob-assistant")?.observations["clean-exchange"]).toBe(1);
  });

  it("a request to a peer it never met runs the handshake first", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onRequest("agent.command", () => ({ done: true }));
    await expect(
      alice.request("bob-assistant", { action: "x" }, { method: "agent.command" }),
    ).resolves.toEqual({
      done: true,
    });
    expect(alice.handshakeState("bob-assistant")).toBe("established");
  });

  it("delivers notifications in order, and the sender sees them acknowledged", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const got: unknown[] = [];
    bob.onNotification((body, context) => {
      got.push([body.n, context.from, context.type]);
    });
    const ids: string[] = [];
    for (let n = 1; n <= 3; n++) ids.push((await alice.notify("bob-assistant", { n })).id);
    await eventually(() => got.length === 3, "three notifications arrived");
    expect(got).toEqual([1, 2, 3].map((n) => [n, "alice-assistant", "notification"]));
    await eventually(
      async () => (await t.statusOf(t.alpha, ids[2]!)).status === "acknowledged",
      "acknowledged",
    );
  });

  it("hands off a task and returns the peer's decision", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onHandoff((handoff, context) => ({
      accepted: true,
      continuing: handoff.remaining,
      meeting: handoff.context.meeting,
      from: context.from,
    }));
    const answer = await alice.handoff("bob-assistant", {
      completed: ["found a common slot"],
      remaining: "send the invitation",
      context: { meeting: "2026-02-18T10:00:00Z" },
    });
    expect(answer).toEqual({
      accepted: true,
      continuing: "send the invitation",
      meeting: "2026-02-18T10:00:00Z",
      from: "alice-assistant",
    });
    const bad = alice.handoff("bob-assistant", { completed: "", remaining: "x", context: {} });
    await expect(bad).rejects.toMatchObject({
      code: ErrorCode.InvalidParams,
      data: { problems: [{ path: "/completed" }] },
    });
  });

  it("a peer's error response rejects with its code; a missing handler is MethodNotFound", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onRequest("agent.command", () => {
      throw new AcpError("PermissionDenied", "alice may not cancel meetings", { command: "cancel" });
    });
    const denied = await alice
      .request("bob-assistant", { action: "cancel" }, { method: "agent.command" })
      .catch((e) => e);
    expect(denied).toBeInstanceOf(AcpError);
    expect(denied).toMatchObject({
      code: ErrorCode.PermissionDenied,
      message: "alice may not cancel meetings",
      data: { reason: "PermissionDenied", command: "cancel", peer: "bob-assistant" },
    });
    await expect(alice.request("bob-assistant", { action: "x" })).rejects.toMatchObject({
      code: ErrorCode.MethodNotFound,
      message: "bob-assistant has no handler for agent.request",
    });
    expect(alice.trust("bob-assistant")?.observations["rejected-request"]).toBe(2);
  });

  it("a handler that throws answers -32603 without leaking the error", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onRequest(() => {
      throw new Error("database password is hunter2");
    });
    const err = await alice.request("bob-assistant", { action: "x" }).catch((e: AcpError) => e);
    expect(err).toMatchObject({ code: ErrorCode.InternalError });
    expect(JSON.stringify(err.data) + err.message).not.toContain("hunter2");
    expect(bob.errors.map((e) => e.message)).toContain("database password is hunter2");
  });

  it("a request without an answer times out, an aborted one is cancelled", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const never = deferred();
    t.cleanups.push(async () => never.resolve());
    bob.onRequest(() => never.promise);
    await alice.handshake("bob-assistant");
    const timedOut = alice.request("bob-assistant", { action: "slow" }, { timeoutMs: 300 });
    await expect(timedOut).rejects.toMatchObject({
      code: ErrorCode.Timeout,
      data: { peer: "bob-assistant" },
    });
    expect(alice.trust("bob-assistant")?.observations.timeout).toBe(1);
    const controller = new AbortController();
    const aborted = alice.request("bob-assistant", { action: "slow" }, { signal: controller.signal });
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ code: ErrorCode.Cancelled });
  });

  it("encrypts a request and its response end to end", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onRequest((body, context) => ({
      diagnosis: `private for ${body.patient}`,
      wasEncrypted: context.encrypted,
    }));
    const sent: string[] = [];
    alice.on("message", (m) => sent.push(m.messageId));
    const answer = await alice.request("bob-assistant", { patient: "Jane Roe" }, { encrypt: true });
    expect(answer).toEqual({ diagnosis: "private for Jane Roe", wasEncrypted: true });
    const http = new GatewayClient({ gateway: t.gw.url, apiKey: t.alpha.apiKey });
    const { items } = await http.listMessages({ kind: "response" });
    const stored = await http.getMessage(items.at(-1)!.id, items.at(-1)!.from);
    expect(JSON.stringify(stored.envelope)).not.toContain("private for");
    expect(JSON.stringify(stored.envelope)).toMatch(/"jwe":/);
    const entries = [];
    for await (const { entry } of readAudit({
      root: `${t.dir}/audit`,
      agent: "alice-assistant",
      type: "request",
    }))
      entries.push(entry);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ encrypted: true });
    expect(entries[0]!.summary).not.toContain("Jane");
  });

  it("writes every handshake step and message, with summaries, to a verifiable audit log", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    bob.onRequest(() => ({ available_slots: ["2026-02-18T10:00:00Z"] }));
    await alice.request(
      "bob-assistant",
      { action: "get-availability", parameters: { duration_minutes: 60 } },
      { summary: "Asked for bob's free slots next week" },
    );
    const log: string[] = [];
    for await (const { entry } of readAudit({ root: `${t.dir}/audit`, agent: "alice-assistant" })) {
      log.push(`${entry.direction} ${entry.method}${entry.step ? ` [${entry.step}]` : ""}: ${entry.summary}`);
      expect(entry.channel).toMatch(/^gateway:agent\.(alice|bob)-assistant\.inbox$/);
    }
    expect(log).toEqual([
      expect.stringMatching(
        /^sent agent\.announce \[announce\]: alice-assistant introduced itself to bob-assistant/,
      ),
      expect.stringMatching(
        /^received agent\.announce \[announce\]: bob-assistant introduced itself to alice-assistant/,
      ),
      expect.stringMatching(
        /^received agent\.announce \[verify\]: Verified bob-assistant's announce signature/,
      ),
      expect.stringMatching(/^sent agent\.capabilities \[capabilities\]/),
      expect.stringMatching(/^received agent\.capabilities \[capabilities\]/),
      expect.stringMatching(
        /^received agent\.capabilities \[trust\]: Handshake with bob-assistant complete; initial trust baseline/,
      ),
      "sent agent.request: Asked for bob's free slots next week",
      expect.stringMatching(/^received agent\.response: bob-assistant answered alice-assistant's request/),
    ]);
    await alice.close();
    const verification = await verifyAudit(`${t.dir}/audit/alice-assistant`);
    expect(verification).toMatchObject({ ok: true, entries: 8 });
  });

  it("reports presence to the gateway", async () => {
    const alice = await t.connected(t.alpha);
    await alice.setPresence({ state: "busy", load: 40, activeTasks: 2, tasks: [{ id: "t1", progress: 50 }] });
    const view = await new GatewayClient({ gateway: t.gw.url, apiKey: t.beta.apiKey }).getAgent(
      "alice-assistant",
    );
    expect(view.presence).toMatchObject({ state: "busy", load: 40, activeTasks: 2 });
    await expect(alice.setPresence({ load: 140 })).rejects.toMatchObject({
      code: ErrorCode.InvalidParams,
      data: { problems: [{ path: "/load" }] },
    });
  });

  it("refuses a wrong API key or a key file that is not the registered one", async () => {
    const stranger = { ...t.beta, apiKey: "acp_not-a-key" };
    await expect(agentFor(t.gw, stranger, t.dir).connect()).rejects.toMatchObject({
      code: ErrorCode.Unauthorized,
    });
    const wrongKeys = { ...t.beta, identity: { ...t.alpha.identity, agentId: "bob-assistant" } };
    await expect(agentFor(t.gw, wrongKeys, t.dir).connect()).rejects.toMatchObject({
      code: ErrorCode.UnknownKey,
    });
    expect(() => agentFor(t.gw, { ...t.beta, apiKey: "" }, t.dir)).toThrow(/apiKey is required/);
  });

  it("a typed handler validates the body before it runs: a bad body is refused -32602 with problems", async () => {
    const alice = await t.connected(t.alpha);
    const bob = await t.connected(t.beta);
    const ran: unknown[] = [];
    const Booking = z.object({ room: z.string(), seats: z.number().int().positive().default(1) });
    bob.onRequest("agent.book", { body: Booking }, (body) => {
      expectTypeOf(body).toEqualTypeOf<{ room: string; seats: number }>();
      ran.push(body);
      return { booked: `${body.room} x${body.seats}` };
    });
    await expect(alice.request("bob-assistant", { room: "Ada" }, { method: "agent.book" })).resolves.toEqual({
      booked: "Ada x1",
    });
    const refused = await alice
      .request("bob-assistant", { room: 7, seats: -2 }, { method: "agent.book" })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AcpError);
    expect(refused).toMatchObject({
      code: ErrorCode.InvalidParams,
      data: {
        reason: "InvalidParams",
        problems: [
          { path: "/params/body/room", message: expect.any(String) },
          { path: "/params/body/seats", message: expect.any(String) },
        ],
      },
    });
    expect((refused as AcpError).message).toMatch(/^invalid body for agent\.book: \/params\/body\/room /);
    expect(ran).toEqual([{ room: "Ada", seats: 1 }]);
    // Untyped handlers are unchanged: they get the body as sent.
    bob.onRequest("agent.echo", (body) => body);
    await expect(alice.request("bob-assistant", { room: 7 }, { method: "agent.echo" })).resolves.toEqual({
      room: 7,
    });
  });

  it("a call before connect() or a second connect() is a local SdkError, not a wire code", async () => {
    const idle = agentFor(t.gw, t.beta, t.dir);
    const early = await idle.request("alice-assistant", { x: 1 }).catch((e: unknown) => e);
    expect(early).toBeInstanceOf(SdkError);
    expect(early).not.toBeInstanceOf(AcpError);
    expect(early).toMatchObject({ kind: "NotConnected", message: "call connect() first" });
    const bob = await t.connected(t.beta);
    const twice = await bob.connect().catch((e: unknown) => e);
    expect(twice).toBeInstanceOf(SdkError);
    expect(twice).toMatchObject({ kind: "AlreadyConnected" });
    expect(twice).not.toHaveProperty("code");
  });
}
