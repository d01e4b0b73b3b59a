import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import type { AgentRecord } from "../../src/gateway/index.js";
import {
  buildAnnounce,
  buildCapabilities,
  buildErrorResponse,
  buildNotification,
  buildRequest,
  buildResponse,
  createSigner,
  ErrorCode,
  generateIdentity,
  keyId,
  publicIdentity,
  signMessage,
} from "../../src/protocol/index.js";
import { MessageListItem, MessagePage, MessageStatusView } from "../../src/wire/messages.js";
import { api, FrameClient, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import {
  deliveredBefore,
  errorOf,
  handshake,
  receive,
  SCHEDULING_CAPABILITIES,
  submit,
} from "../helpers/messaging.js";

export type GatewayFactory = (options?: Record<string, unknown>) => Promise<TestGateway>;

/** The relay's guarantees and rejections; run unchanged against each broker. */
export function gatewaySuite(makeGateway: GatewayFactory): void {
  let gw: TestGateway;
  let alpha: TestAgent;
  let beta: TestAgent;
  beforeEach(async () => {
    gw = await makeGateway();
    alpha = await gw.register("agent-alpha");
    beta = await gw.register("agent-beta");
  });
  afterEach(async () => {
    await gw.close();
  });

  it("registration needs the admin token and a valid identity", async () => {
    const body = { agentId: "agent-x", principalId: "p", signing: alpha.identity.signing };
    expect((await api(gw.url, "/api/v1/agents", { body })).status).toBe(401);
    const asAgent = await api(gw.url, "/api/v1/agents", { body, apiKey: alpha.apiKey });
    expect(asAgent.status).toBe(403);
    expect(errorOf(asAgent.json).code).toBe(ErrorCode.Forbidden);
    const bad = await api(gw.url, "/api/v1/agents", {
      body: { ...body, agentId: "bad.id" },
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    expect(bad.status).toBe(400);
    expect(errorOf(bad.json).data.problems).toEqual([expect.objectContaining({ path: "/agent_id" })]);
    const again = await api(gw.url, "/api/v1/agents", {
      body: { agentId: "agent-alpha", principalId: "p", signing: alpha.identity.signing },
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    expect(again.status).toBe(409);
  });

  it("delivers a request after the handshake and tracks its status to acknowledged", async () => {
    await handshake(gw, alpha, beta);
    const request = buildRequest(alpha.sender, "agent-beta", { action: "get-availability" });
    const submitted = await submit(gw, alpha, request);
    expect(submitted.status).toBe(202);
    expect(submitted.json).toMatchObject({
      id: request.params.headers["message-id"],
      status: "queued",
      duplicate: false,
    });
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await ws.next("ready");
    const frame = await ws.next("new_message", (f) => f.method === "agent.request");
    expect(frame.envelope).toEqual(signMessage(request, alpha.signer));
    const delivered = await api(gw.url, `/api/v1/messages/${frame.id}/status`, { apiKey: alpha.apiKey });
    expect(delivered.json).toMatchObject({ status: "delivered", retry_count: 0 });
    ws.send({ type: "acknowledge", id: frame.id, from: frame.from });
    await expect
      .poll(
        async () =>
          (await api(gw.url, `/api/v1/messages/${frame.id}/status`, { apiKey: alpha.apiKey })).json.status,
      )
      .toBe("acknowledged");
    await ws.close();
  });

  it("answers one casing for a message record, list, read and status alike; the old camelCase names too, deprecated", async () => {
    await handshake(gw, alpha, beta);
    const request = buildRequest(alpha.sender, "agent-beta", { action: "x" });
    const id = request.params.headers["message-id"];
    expect((await submit(gw, alpha, request)).status).toBe(202);
    const status = (await api(gw.url, `/api/v1/messages/${id}/status`, { apiKey: alpha.apiKey })).json;
    const page = (await api(gw.url, "/api/v1/messages?type=request", { apiKey: alpha.apiKey })).json;
    const item = (page.items as { id: string }[]).find((i) => i.id === id);
    const read = (await api(gw.url, `/api/v1/messages/${id}`, { apiKey: alpha.apiKey })).json;
    for (const record of [status, item, read]) {
      expect(record).toMatchObject({
        id,
        from: "agent-alpha",
        to: "agent-beta",
        status: "queued",
        queued_at: status.queued_at,
        retry_count: 0,
      });
    }
    expect(MessageStatusView.parse(status)).toEqual(status);
    expect(MessagePage.parse(page).items).toContainEqual(MessageListItem.parse(item));
    expect(read).toMatchObject({
      kind: "request",
      method: "agent.request",
      submitted_at: expect.any(String),
    });
    expect(read.envelope).toEqual(signMessage(request, alpha.signer));
    expect(page).toHaveProperty("next_cursor", null);
    // The names these answers had before, kept for one deprecation period.
    for (const record of [item, read]) {
      expect(record).toMatchObject({
        queuedAt: status.queued_at,
        retryCount: 0,
        submittedAt: read.submitted_at,
      });
    }
    expect(page).toHaveProperty("nextCursor", null);
    expect(status).not.toHaveProperty("queuedAt");
  });

  it("refuses substantive messages before the handshake, and after a key or layer change", async () => {
    const early = await submit(gw, alpha, buildRequest(alpha.sender, "agent-beta", {}));
    expect(early.status).toBe(409);
    expect(errorOf(early.json).code).toBe(ErrorCode.HandshakeRequired);
    await handshake(gw, alpha, beta);
    const changed = await submit(
      gw,
      alpha,
      buildNotification({ ...alpha.sender, layers: [0] }, "agent-beta", {}),
    );
    expect(errorOf(changed.json).code).toBe(ErrorCode.HandshakeRequired);
    // The change reset the pair: even a well-formed message needs a new handshake now.
    const after = await submit(gw, alpha, buildNotification(alpha.sender, "agent-beta", {}));
    expect(errorOf(after.json).code).toBe(ErrorCode.HandshakeRequired);
  });

  it("refuses a message signed with another key than the announced one, and resets the pair", async () => {
    await handshake(gw, alpha, beta);
    // The operator re-keys agent-alpha in the registry's store (what a key replacement writes):
    // its messages now verify against the new key, which is not the key it announced with.
    const rekeyed = generateIdentity("agent-alpha", alpha.sender.principalId);
    const agents = gw.gateway.broker.kv<AgentRecord>("agents");
    const entry = await agents.get("agent-alpha");
    if (!entry) throw new Error("agent-alpha is not in the registry's store");
    const signing = { ...publicIdentity(rekeyed).signing };
    await agents.update(
      "agent-alpha",
      { ...entry.value, signing: { ...signing, kid: keyId("agent-alpha", signing) } },
      entry.revision,
    );
    const alphaRekeyed: TestAgent = { ...alpha, identity: rekeyed, signer: createSigner(rekeyed) };
    const newKey = () => submit(gw, alphaRekeyed, buildNotification(alpha.sender, "agent-beta", {}));
    // The registry hears the change through its watch: wait until the new key verifies at all.
    await expect.poll(async () => errorOf((await newKey()).json).code).toBe(ErrorCode.HandshakeRequired);
    const refused = await newKey();
    expect(refused.status).toBe(409);
    expect(errorOf(refused.json)).toMatchObject({ code: ErrorCode.HandshakeRequired });
    // The pair was reset for both sides: agent-beta, whose key did not change, must handshake again too.
    const fromBeta = await submit(gw, beta, buildNotification(beta.sender, "agent-alpha", {}));
    expect(errorOf(fromBeta.json).code).toBe(ErrorCode.HandshakeRequired);
    await handshake(gw, alphaRekeyed, beta);
    expect((await newKey()).status).toBe(202);
  });

  it("relays a response while the pair re-handshakes, but no new request", async () => {
    await handshake(gw, alpha, beta);
    const request = buildRequest(alpha.sender, "agent-beta", { action: "slow" });
    expect((await submit(gw, alpha, request)).status).toBe(202);
    // Beta re-announces (e.g. it restarted) before answering: the pair is back at step 1.
    const again = await submit(
      gw,
      beta,
      buildAnnounce(beta.sender, "agent-alpha", { capabilities: [], purpose: "again" }),
    );
    expect(again.status).toBe(202);
    const response = await submit(gw, beta, buildResponse(beta.sender, request, { ok: true }));
    expect(response.status, JSON.stringify(response.json)).toBe(202);
    const fresh = await submit(gw, beta, buildRequest(beta.sender, "agent-alpha", {}));
    expect(errorOf(fresh.json).code).toBe(ErrorCode.HandshakeRequired);
  });

  it("relays a signed error response and writes it to the relay audit log", async () => {
    await handshake(gw, alpha, beta);
    const request = buildRequest(alpha.sender, "agent-beta", { action: "forbidden" });
    expect((await submit(gw, alpha, request)).status).toBe(202);
    const denial = buildErrorResponse(beta.sender, request, { code: -32021, message: "not allowed" });
    const answer = await submit(gw, beta, denial);
    expect(answer.status, JSON.stringify(answer.json)).toBe(202);
    expect(answer.json).toMatchObject({ duplicate: false });
    // The relay audit append is queued behind the answer: wait for the entry, then check it.
    const audited = async () => {
      const entries = [];
      for await (const { entry } of readAudit({ root: join(gw.dataDir, "relay-audit"), agent: "agent-beta" }))
        entries.push(entry);
      return entries;
    };
    await expect.poll(async () => (await audited()).some((e) => e.error !== undefined)).toBe(true);
    expect((await audited()).find((e) => e.error)).toMatchObject({
      from: { agent: "agent-beta" },
      to: { agent: "agent-alpha" },
      type: "response",
      messageId: (denial.error.data as { headers: Record<string, string> }).headers["message-id"],
      error: { code: -32021, message: "not allowed" },
    });
  });

  it("is idempotent for the same envelope and refuses a reused id with other content", async () => {
    await handshake(gw, alpha, beta);
    const message = buildNotification(alpha.sender, "agent-beta", { n: 1 });
    const signed = signMessage(message, alpha.signer);
    const first = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: signed });
    const second = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: signed });
    expect(first.json).toMatchObject({ duplicate: false });
    expect(second.status).toBe(202);
    expect(second.json).toMatchObject({ id: first.json.id, duplicate: true });
    const reused = buildNotification(
      alpha.sender,
      "agent-beta",
      { n: 2 },
      { messageId: message.params.headers["message-id"] },
    );
    const replay = await submit(gw, alpha, reused);
    expect(replay.status).toBe(409);
    expect(errorOf(replay.json).code).toBe(ErrorCode.Replay);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    const ids = await receive(ws, 3);
    expect(ids.filter((id) => id === first.json.id)).toHaveLength(1);
    expect(await deliveredBefore(ws, gw, alpha, "agent-beta")).toEqual([]);
    await ws.close();
  });

  it("rejects unsigned, tampered, impersonating, stale and misaddressed envelopes with their codes", async () => {
    await handshake(gw, alpha, beta);
    const message = buildNotification(alpha.sender, "agent-beta", { n: 1 });
    const unsigned = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: message });
    expect([unsigned.status, errorOf(unsigned.json).code]).toEqual([400, ErrorCode.SignatureMissing]);

    const signed = signMessage(message, alpha.signer);
    const tampered = { ...signed, params: { ...signed.params, body: { n: 2 } } };
    const t = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: tampered });
    expect([t.status, errorOf(t.json).code]).toEqual([401, ErrorCode.SignatureInvalid]);

    const rerouted = {
      ...signed,
      params: { ...signed.params, headers: { ...signed.params.headers, "recipient-id": "agent-alpha" } },
    };
    const r = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: rerouted });
    expect(errorOf(r.json).code).toBe(ErrorCode.SignatureInvalid);

    // Beta's key submitting alpha's signed envelope: no impersonation.
    const imp = await api(gw.url, "/api/v1/messages", { apiKey: beta.apiKey, body: signed });
    expect([imp.status, errorOf(imp.json).code]).toEqual([403, ErrorCode.Forbidden]);
    // Beta claiming to be alpha in the headers, signed with beta's own key.
    const claim = await submit(gw, beta, buildNotification(alpha.sender, "agent-beta", {}), beta.apiKey);
    expect(errorOf(claim.json).code).toBe(ErrorCode.Forbidden);

    const stale = await submit(
      gw,
      alpha,
      buildNotification(alpha.sender, "agent-beta", {}, { now: new Date(Date.now() - 10 * 60_000) }),
    );
    expect([stale.status, errorOf(stale.json).code]).toEqual([400, ErrorCode.StaleTimestamp]);

    const nobody = await submit(gw, alpha, buildNotification(alpha.sender, "agent-nobody", {}));
    expect([nobody.status, errorOf(nobody.json).code]).toEqual([404, ErrorCode.UnknownRecipient]);

    const malformed = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, rawBody: "{not json" });
    expect([malformed.status, errorOf(malformed.json).code]).toEqual([400, ErrorCode.ParseError]);

    const noKey = await api(gw.url, "/api/v1/messages", { body: signed });
    expect([noKey.status, errorOf(noKey.json).code]).toEqual([401, ErrorCode.Unauthorized]);
  });

  it("accepts every documented credential header", async () => {
    const variants: Record<string, string>[] = [
      { "x-api-key": alpha.apiKey },
      { "api-key": alpha.apiKey },
      { authorization: `Bearer ${alpha.apiKey}` },
    ];
    for (const headers of variants) {
      expect((await api(gw.url, "/api/v1/agents/agent-beta", { headers })).status).toBe(200);
    }
    expect(
      (await api(gw.url, "/api/v1/agents/agent-beta", { headers: { authorization: "Bearer nope" } })).status,
    ).toBe(401);
  });

  it("lets an agent read only its own messages", async () => {
    const gamma = await gw.register("agent-gamma");
    await handshake(gw, alpha, beta);
    const sent = await submit(
      gw,
      alpha,
      buildNotification(alpha.sender, "agent-beta", { secret: "for beta" }),
    );
    const id = sent.json.id as string;
    // Ids are per sender: the recipient names the sender; the sender its own id alone.
    const named = `${id}?from=agent-alpha`;
    expect((await api(gw.url, `/api/v1/messages/${named}`, { apiKey: beta.apiKey })).status).toBe(200);
    expect((await api(gw.url, `/api/v1/messages/${id}`, { apiKey: alpha.apiKey })).status).toBe(200);
    for (const path of [`/api/v1/messages/${named}`, `/api/v1/messages/${id}/status?from=agent-alpha`]) {
      const denied = await api(gw.url, path, { apiKey: gamma.apiKey });
      expect([denied.status, errorOf(denied.json).code]).toEqual([404, ErrorCode.NotFound]);
    }
    const ack = await api(gw.url, `/api/v1/messages/${id}/acknowledge?from=agent-alpha`, {
      apiKey: gamma.apiKey,
      method: "POST",
    });
    expect(ack.status).toBe(404);
    // The sender cannot acknowledge on the recipient's behalf.
    const senderAck = await api(gw.url, `/api/v1/messages/${id}/acknowledge?from=agent-alpha`, {
      apiKey: alpha.apiKey,
      method: "POST",
    });
    expect(senderAck.status).toBe(403);
    // The recipient may name the message by its id alone (the messaging platform's shape).
    const idAlone = await api(gw.url, `/api/v1/messages/${id}/acknowledge`, {
      apiKey: beta.apiKey,
      method: "POST",
    });
    expect([idAlone.status, idAlone.json.status]).toEqual([200, "acknowledged"]);
    const list = await api(gw.url, "/api/v1/messages", { apiKey: gamma.apiKey });
    expect(list.json.items).toEqual([]);
    const own = await api(gw.url, "/api/v1/messages?type=notification", { apiKey: beta.apiKey });
    expect((own.json.items as { id: string }[]).map((m) => m.id)).toContain(id);
    const badFilter = await api(gw.url, "/api/v1/messages?type=bogus", { apiKey: beta.apiKey });
    expect(badFilter.status).toBe(400);
  });

  it("queues for an offline recipient and delivers in order on connect", async () => {
    await handshake(gw, alpha, beta);
    const ids: string[] = [];
    for (let n = 0; n < 20; n++) {
      const r = await submit(gw, alpha, buildNotification(alpha.sender, "agent-beta", { n }));
      ids.push(r.json.id as string);
    }
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    expect(await receive(ws, 20, "agent.notification")).toEqual(ids);
    await ws.close();
  });

  it("submits over the WebSocket too, answering with the ref", async () => {
    await handshake(gw, alpha, beta);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    await ws.next("ready");
    const signed = signMessage(buildNotification(alpha.sender, "agent-beta", { via: "ws" }), alpha.signer);
    ws.send({ type: "submit", ref: 7, envelope: signed });
    expect(await ws.next("submitted")).toMatchObject({ ref: 7, duplicate: false });
    ws.send({ type: "submit", ref: 8, envelope: { ...signed, signature: undefined } });
    const error = await ws.next("error");
    expect(error).toMatchObject({ ref: 8, error: { code: ErrorCode.SignatureMissing } });
    ws.send({ type: "bogus" });
    expect((await ws.next("error")).error.code).toBe(ErrorCode.InvalidRequest);
    await ws.close();
  });

  it("keeps one sender's pipelined WebSocket submits in order, handshake steps included", async () => {
    // Announces done, capabilities not yet: the request sent right behind alpha's capabilities
    // must not overtake it at the handshake gate.
    for (const [x, y] of [
      [alpha, beta],
      [beta, alpha],
    ] as const) {
      const r = await submit(
        gw,
        x,
        buildAnnounce(x.sender, y.sender.agentId, { capabilities: [], purpose: "p" }),
      );
      expect(r.status).toBe(202);
    }
    expect(
      (await submit(gw, beta, buildCapabilities(beta.sender, "agent-alpha", SCHEDULING_CAPABILITIES))).status,
    ).toBe(202);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    await ws.next("ready");
    const frames = [
      buildCapabilities(alpha.sender, "agent-beta", SCHEDULING_CAPABILITIES),
      buildRequest(alpha.sender, "agent-beta", { n: -1 }),
      ...Array.from({ length: 30 }, (_, n) => buildNotification(alpha.sender, "agent-beta", { n })),
    ];
    // All sent in one go, without waiting for any answer.
    for (const [ref, m] of frames.entries()) {
      ws.send({ type: "submit", ref, envelope: signMessage(m, alpha.signer) });
    }
    const answered = new Map<number, string>();
    while (answered.size < frames.length) {
      // A refusal arrives as an `error` frame instead, and this times out naming it.
      const frame = await ws.next("submitted", () => true, 5_000);
      answered.set(frame.ref as number, frame.id);
    }
    await ws.close();
    const inbox = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    const expected = frames.map((_, ref) => answered.get(ref));
    // Alpha's announce comes first, then everything in the order it was sent.
    expect((await receive(inbox, frames.length + 1)).slice(1)).toEqual(expected);
    await inbox.close();
  });

  it("refuses a WebSocket without a valid key", async () => {
    const ws = await FrameClient.connect(gw.gateway.wsUrl, "acp_wrong");
    expect((await ws.next("error")).error.code).toBe(ErrorCode.Unauthorized);
    await expect.poll(() => ws.closed?.code).toBe(4401);
    const viaFrame = await FrameClient.connect(gw.gateway.wsUrl);
    viaFrame.send({ type: "auth", apiKey: beta.apiKey });
    expect((await viaFrame.next("ready")).agentId).toBe("agent-beta");
    await viaFrame.close();
  });

  it("shows presence from the connection and the agent's own reports", async () => {
    const before = await api(gw.url, "/api/v1/agents/agent-beta", { apiKey: alpha.apiKey });
    expect((before.json.presence as { state: string }).state).toBe("offline");
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await ws.next("ready");
    ws.send({ type: "presence", presence: { state: "busy", load: 40, activeTasks: 2 } });
    await expect
      .poll(
        async () => (await api(gw.url, "/api/v1/agents/agent-beta", { apiKey: alpha.apiKey })).json.presence,
      )
      .toMatchObject({ state: "busy", load: 40, activeTasks: 2, connections: 1 });
    await ws.close();
    await expect
      .poll(
        async () =>
          (
            (await api(gw.url, "/api/v1/agents/agent-beta", { apiKey: alpha.apiKey })).json.presence as {
              state: string;
            }
          ).state,
      )
      .toBe("offline");
  });
}
