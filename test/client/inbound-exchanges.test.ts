/**
 * The receive side (src/client/inbound.ts) in exchanges, through a gateway the test plays at the
 * socket (scripted-gateway.ts): answers settle only the request they answer, from the peer asked;
 * the handshake gate refuses what a verified sender may not send (a request with a signed error,
 * anything else with a reject); a message from a peer this agent lost its handshake with waits,
 * in order, for a new one; a response the gateway refuses or may not have taken is dealt with.
 */
import { describe, expect, it } from "vitest";
import {
  AcpError,
  type AcpMessage,
  buildErrorResponse,
  buildNotification,
  buildRequest,
  buildResponse,
  ErrorCode,
  signMessage,
} from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import {
  auditEntries,
  notification,
  request,
  type ScriptedPair,
  useScriptedPair,
} from "./scripted-gateway.js";

const tmp = useTmpDir("acp-inbound-");
/** A body that claims to be end-to-end encrypted and decrypts to nothing. */
const UNDECRYPTABLE = { jwe: "eyJhbGciOiJFQ0RILUVTIn0.AAAA.AAAAAAAAAAAAAAAA.AAAA.AAAAAAAAAAAAAAAAAAAAAA" };

/** The last envelope `agentId` submitted that answers JSON-RPC id `id`. */
const answerTo = (t: ScriptedPair, agentId: string, id: unknown) =>
  t.gw
    .submittedBy(agentId)
    .filter((m) => !("method" in m) && (m as { id?: unknown }).id === id)
    .at(-1) as Record<string, unknown> | undefined;

describe("an agent settles a request only with its peer's answer to it", () => {
  const t = useScriptedPair(tmp);

  it("resolves with the answer and counts the clean exchange", async () => {
    t.alice.onRequest((body) => ({ echo: body }));
    const before = t.bob.trust("alice-assistant")!.observations["clean-exchange"];
    const kinds: string[] = [];
    t.bob.on("message", (m) => kinds.push(m.kind));
    await expect(t.bob.request("alice-assistant", { q: 1 })).resolves.toEqual({ echo: { q: 1 } });
    expect(kinds).toEqual(["response"]);
    expect(t.bob.trust("alice-assistant")!.observations["clean-exchange"]).toBe(before + 1);
  });

  it("rejects with the peer's error response and counts the rejected request", async () => {
    t.alice.onRequest(() => {
      throw new AcpError("InvalidParams", "no such slot");
    });
    const before = t.bob.trust("alice-assistant")!;
    await expect(t.bob.request("alice-assistant", { q: 1 })).rejects.toMatchObject({
      kind: "InvalidParams",
      message: "no such slot",
      data: { peer: "alice-assistant" },
    });
    expect(t.bob.trust("alice-assistant")).toMatchObject({
      observations: { "rejected-request": 1 },
      score: Math.round((before.score - 0.05) * 1000) / 1000,
    });
  });

  it("shows an encrypted answer decrypted, and an error answer as not encrypted, on its message event", async () => {
    let fail = false;
    t.alice.onRequest(() => {
      if (fail) throw new AcpError("InvalidParams", "no");
      return { secret: "answer" };
    });
    const responses: { encrypted: boolean; body: unknown }[] = [];
    t.bob.on("message", (m) => {
      if (m.kind === "response" || m.kind === "error")
        responses.push({ encrypted: m.encrypted, body: m.body });
    });
    await expect(t.bob.request("alice-assistant", { q: 1 }, { encrypt: true })).resolves.toEqual({
      secret: "answer",
    });
    fail = true;
    await expect(t.bob.request("alice-assistant", { q: 2 }, { encrypt: true })).rejects.toMatchObject({
      kind: "InvalidParams",
    });
    expect(responses).toEqual([
      { encrypted: true, body: { secret: "answer" } },
      { encrypted: false, body: undefined },
    ]);
  });

  it("takes, and does not settle with, an answer from another agent or one without an id", async () => {
    const carol = t.gw.register("carol-assistant", "carol");
    let held: AcpMessage | undefined;
    t.gw.onSubmit((envelope, from) => {
      if (from !== "alice-assistant" || "method" in envelope) return "relay";
      held = envelope;
      return "drop";
    });
    t.alice.onRequest(() => ({ from: "alice" }));
    const before = t.bob.trust("alice-assistant")!.observations;
    const answer = t.bob.request("alice-assistant", { q: 1 });
    await expect.poll(() => held).toBeDefined();
    const asked = { id: (held as { id: string }).id, params: { headers: { "agent-id": "bob-assistant" } } };
    const fromCarol = t.gw.deliver(
      "bob-assistant",
      signMessage(buildResponse(carol.sender, asked, { from: "carol" }), carol.signer),
    );
    const withoutId = t.gw.deliver(
      "bob-assistant",
      signMessage(
        buildErrorResponse(t.a.sender, { ...asked, id: null } as never, new AcpError("InvalidRequest")),
        t.a.signer,
      ),
    );
    const unasked = t.gw.deliver(
      "bob-assistant",
      signMessage(buildResponse(t.a.sender, { ...asked, id: "never-asked" }, { from: "alice" }), t.a.signer),
    );
    for (const frame of [fromCarol, withoutId, unasked]) {
      expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    }
    // Only the answer to the request counts toward trust: the error without an id and the
    // answer to nothing did not.
    expect(t.bob.trust("alice-assistant")!.observations).toEqual(before);
    t.gw.deliver("bob-assistant", held as object);
    await expect(answer).resolves.toEqual({ from: "alice" });
    expect(t.bob.trust("alice-assistant")!.observations["clean-exchange"]).toBe(before["clean-exchange"] + 1);
    expect(t.bob.trust("carol-assistant")).toBeUndefined();
  });

  it("rejects the request with an answer whose encrypted body does not decrypt", async () => {
    let held: AcpMessage | undefined;
    t.gw.onSubmit((envelope, from) => {
      if (from !== "bob-assistant" || !("method" in envelope) || envelope.method !== "agent.request")
        return "relay";
      held = envelope;
      return "drop";
    });
    const answer = t.bob.request("alice-assistant", { q: 1 });
    await expect.poll(() => held).toBeDefined();
    const before = t.bob.trust("alice-assistant")!.observations;
    const frame = t.gw.deliver(
      "bob-assistant",
      signMessage(buildResponse(t.a.sender, held as never, UNDECRYPTABLE), t.a.signer),
    );
    await expect(answer).rejects.toMatchObject({ kind: "DecryptionFailed" });
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    expect(t.bob.trust("alice-assistant")!.observations).toEqual(before);
  });
});

describe("an agent's handshake gate refuses what a verified sender may not send", () => {
  const t = useScriptedPair(tmp);
  const handledRequests: unknown[] = [];

  /** Alice's identity as she would sign with other skill layers than the handshake recorded. */
  const changedLayers = () => ({ ...t.a.sender, layers: [0, 1, 2] });

  it("rejects a notification whose sender's layers changed since the handshake", async () => {
    const note = t.gw.deliver(
      "bob-assistant",
      signMessage(buildNotification(changedLayers(), "bob-assistant", { n: 1 }), t.a.signer),
    );
    expect(await t.gw.settled("bob-assistant", note.id)).toEqual({
      type: "reject",
      id: note.id,
      from: "alice-assistant",
      reason: `${ErrorCode.HandshakeRequired} declared skill layers changed since the handshake; handshake again`,
    });
    expect(t.errors.map((e) => (e as AcpError).kind)).toEqual(["HandshakeRequired"]);
    expect(t.handled).toEqual([]);
  });

  it("answers a request whose sender's layers changed with a signed error, and acknowledges it", async () => {
    t.bob.onRequest((body) => {
      handledRequests.push(body);
    });
    const asked = signMessage(buildRequest(changedLayers(), "bob-assistant", { q: 1 }), t.a.signer);
    const req = t.gw.deliver("bob-assistant", asked);
    expect(await t.gw.settled("bob-assistant", req.id)).toMatchObject({ type: "acknowledge" });
    expect(answerTo(t, "bob-assistant", asked.id)).toMatchObject({
      error: { code: ErrorCode.HandshakeRequired },
    });
    expect(handledRequests).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it("refuses an encrypted body that does not decrypt: a notification rejected, a request answered", async () => {
    t.bob.onRequest((body) => {
      handledRequests.push(body);
    });
    const note = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", UNDECRYPTABLE));
    expect(await t.gw.settled("bob-assistant", note.id)).toMatchObject({
      type: "reject",
      reason: expect.stringMatching(new RegExp(`^${ErrorCode.DecryptionFailed} `)),
    });
    const asked = request(t.a, "bob-assistant", UNDECRYPTABLE);
    const req = t.gw.deliver("bob-assistant", asked);
    expect(await t.gw.settled("bob-assistant", req.id)).toMatchObject({ type: "acknowledge" });
    expect(answerTo(t, "bob-assistant", asked.id)).toMatchObject({
      error: { code: ErrorCode.DecryptionFailed },
    });
    expect(handledRequests).toEqual([]);
    expect(t.handled).toEqual([]);
  });

  it("hands an end-to-end encrypted notification to its handler decrypted", async () => {
    const { id } = await t.alice.notify("bob-assistant", { secret: 1 }, { encrypt: true });
    await t.gw.settled("bob-assistant", id);
    expect(t.handled).toMatchObject([{ body: { secret: 1 }, context: { encrypted: true } }]);
  });
});

describe("an agent that lost its handshake with a sender holds the sender's messages for a new one", () => {
  const t = useScriptedPair(tmp, () => ({ state: false }));

  /** Bob again, with no record of the handshake alice completed with him. */
  async function bobForgot(options: { handshakeWaitMs?: number } = {}) {
    const handled: unknown[] = [];
    const bob = await t.connect(t.b, { state: false, ...options });
    bob.onNotification((body) => {
      handled.push(body);
    });
    await t.bob.close();
    return { bob, handled };
  }

  it("re-establishes it from the gateway's copy of the sender's side, then handles them in order", async () => {
    const [announce, capabilities] = t.gw
      .submittedBy("alice-assistant")
      .filter((m) => "method" in m && ["agent.announce", "agent.capabilities"].includes(m.method));
    t.gw.directory.proofs.set("alice-assistant", {
      peer: "alice-assistant",
      announce: announce as never,
      capabilities: capabilities as never,
    });
    const { bob, handled } = await bobForgot();
    const frames = [1, 2, 3].map((n) =>
      t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n })),
    );
    for (const frame of frames) await t.gw.settled("bob-assistant", frame.id);
    expect(handled).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(bob.handshakeState("alice-assistant")).toBe("established");
  });

  it("keeps a later message behind the held ones even when it arrives as the new handshake completes", async () => {
    let capabilities: AcpMessage | undefined;
    t.gw.onSubmit((envelope, from) => {
      if (from !== "alice-assistant" || !("method" in envelope) || envelope.method !== "agent.capabilities")
        return "relay";
      capabilities = envelope;
      return "drop";
    });
    const { handled } = await bobForgot();
    const first = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await expect.poll(() => capabilities).toBeDefined();
    // The handshake's last step and a new message, back to back: the new one waits its turn.
    t.gw.deliver("bob-assistant", capabilities as object);
    const second = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 2 }));
    for (const frame of [first, second]) await t.gw.settled("bob-assistant", frame.id);
    expect(handled).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it("refuses them once no new handshake completed in time: a notification rejected, a request answered", async () => {
    t.gw.onSubmit((_envelope, from) => (from === "bob-assistant" ? "drop" : "relay"));
    await bobForgot({ handshakeWaitMs: 100 });
    const note = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    const asked = request(t.a, "bob-assistant");
    const req = t.gw.deliver("bob-assistant", asked);
    expect(await t.gw.settled("bob-assistant", note.id)).toMatchObject({
      type: "reject",
      reason: expect.stringMatching(
        new RegExp(`^${ErrorCode.HandshakeRequired} bob-assistant had no handshake`),
      ),
    });
    expect(await t.gw.settled("bob-assistant", req.id)).toMatchObject({ type: "acknowledge" });
    expect(answerTo(t, "bob-assistant", asked.id)).toMatchObject({
      error: { code: ErrorCode.HandshakeRequired },
    });
  });
});

describe("an agent whose response the gateway refuses, or may not have taken", () => {
  const t = useScriptedPair(tmp, () => ({ submitRetry: { maxAttempts: 1 } }));
  let runs = 0;
  const answering = () => {
    runs = 0;
    t.bob.onRequest(() => {
      runs++;
      return { ok: true };
    });
  };
  const refuseBobsAnswers = (error: { code: number; message: string; data?: unknown }) => {
    let refused = 0;
    t.gw.onSubmit((envelope, from) => {
      if (from !== "bob-assistant" || "method" in envelope || refused > 0) return "relay";
      refused++;
      return error;
    });
  };

  it("reports a refused response and takes the request as handled: its redelivery is only acknowledged", async () => {
    answering();
    refuseBobsAnswers({
      code: ErrorCode.InvalidParams,
      message: "refused",
      data: { reason: "InvalidParams" },
    });
    const frame = t.gw.deliver("bob-assistant", request(t.a, "bob-assistant"));
    await expect.poll(() => t.errors.length).toBe(1);
    expect(t.errors[0]).toMatchObject({ kind: "InvalidParams" });
    t.gw.deliver("bob-assistant", frame.envelope, { attempt: 2 });
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    expect(runs).toBe(1);
    expect(t.degraded).toEqual([]);
  });

  it("leaves a request whose response may not have been taken for its redelivery, which sends that response again", async () => {
    answering();
    refuseBobsAnswers({
      code: ErrorCode.StorageUnavailable,
      message: "storage unavailable",
      data: { reason: "StorageUnavailable" },
    });
    const asked = request(t.a, "bob-assistant");
    const frame = t.gw.deliver("bob-assistant", asked);
    await expect.poll(() => t.degraded.length).toBe(1);
    const first = answerTo(t, "bob-assistant", asked.id);
    t.gw.deliver("bob-assistant", frame.envelope, { attempt: 2 });
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    expect(runs).toBe(1);
    expect(answerTo(t, "bob-assistant", asked.id)).toEqual(first);
    expect(t.errors).toEqual([]);
  });
});

describe("a replies-only agent takes only what answers it", () => {
  const t = useScriptedPair(tmp, () => ({ consume: "replies" }));

  it("leaves a peer's notification and request untouched, and takes its answer and news of it", async () => {
    const note = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    const asked = t.gw.deliver("bob-assistant", request(t.a, "bob-assistant"));
    let held: AcpMessage | undefined;
    t.gw.onSubmit((envelope, from) => {
      if (from !== "alice-assistant" || "method" in envelope) return "relay";
      held = envelope;
      return "drop";
    });
    t.alice.onRequest(() => ({ done: true }));
    const answer = t.bob.request("alice-assistant", { q: 1 });
    await expect.poll(() => held).toBeDefined();
    const about = (held as { id: string }).id;
    const progress = t.gw.deliver(
      "bob-assistant",
      notification(t.a, "bob-assistant", { messageId: about, progress: 50 }),
    );
    const requestAbout = t.gw.deliver("bob-assistant", request(t.a, "bob-assistant", { messageId: about }));
    const unrelated = t.gw.deliver(
      "bob-assistant",
      notification(t.a, "bob-assistant", { messageId: "not-a-request-of-bob", progress: 50 }),
    );
    expect(await t.gw.settled("bob-assistant", progress.id)).toMatchObject({ type: "acknowledge" });
    t.gw.deliver("bob-assistant", held as object);
    await expect(answer).resolves.toEqual({ done: true });
    expect(t.handled.map((h) => h.body)).toEqual([{ messageId: about, progress: 50 }]);
    for (const frame of [note, asked, requestAbout, unrelated]) {
      expect(t.gw.sentBy("bob-assistant").filter((f) => f.id === frame.id)).toEqual([]);
    }
  });
});

describe("an agent's audit log records what it received", () => {
  const t = useScriptedPair(tmp);

  it("a handled notification, an answer, and a message its handshake gate refused", async () => {
    t.alice.onRequest(() => ({ ok: true }));
    const note = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await t.gw.settled("bob-assistant", note.id);
    await t.bob.request("alice-assistant", { q: 1 });
    const gated = t.gw.deliver(
      "bob-assistant",
      signMessage(
        buildNotification({ ...t.a.sender, layers: [0, 1, 2] }, "bob-assistant", { n: 2 }),
        t.a.signer,
      ),
    );
    await t.gw.settled("bob-assistant", gated.id);
    await t.bob.close();
    const received = (await auditEntries(t.dir, "bob-assistant")).filter(
      (e) => e.direction === "received" && e.step === undefined,
    );
    expect(received.map((e) => [e.type, e.method, e.error?.code])).toEqual([
      ["notification", "agent.notification", undefined],
      ["response", "agent.response", undefined],
      ["notification", "agent.notification", ErrorCode.HandshakeRequired],
    ]);
  });
});
