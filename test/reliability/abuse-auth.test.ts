/**
 * Abuse of identity and authority: agent A's API key signing as B, A reading B's messages,
 * registering or revoking without the admin token, replaying a captured envelope, downgrading the
 * protocol version. Every attempt is refused with its documented code, and nothing refused is
 * ever delivered.
 */
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { buildAnnounce, buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { api, FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { deliveredBefore, handshake, receive, submit } from "../helpers/messaging.js";
import { recordFigures } from "./support/figures.js";

type Answer = Awaited<ReturnType<typeof api>>;
const codeOf = (answer: Answer) => (answer.json.error as { code: number } | undefined)?.code;

/** Attempts and how each was answered, for the report; `expected` is [status, code]. */
class Attempts {
  readonly outcomes: Array<{ what: string; got: [number, number | undefined]; expected: [number, number] }> =
    [];
  add(what: string, answer: Answer, expected: [number, number]): void {
    this.outcomes.push({ what, got: [answer.status, codeOf(answer)], expected });
  }
  report(name: string, extra: Record<string, number | string> = {}): void {
    const refused = this.outcomes.filter((o) => o.got[0] === o.expected[0] && o.got[1] === o.expected[1]);
    recordFigures(`abuse-${name}`, {
      attempts: this.outcomes.length,
      refusedAsDocumented: refused.length,
      ...extra,
    });
    expect(this.outcomes.map((o) => [o.what, ...o.got])).toEqual(
      this.outcomes.map((o) => [o.what, ...o.expected]),
    );
  }
}

describe("abuse of identity and authority", () => {
  let gw: TestGateway;
  let alpha: TestAgent;
  let beta: TestAgent;
  let gamma: TestAgent;
  afterEach(async () => {
    await gw.close();
  });
  const start = async (versions?: string[]) => {
    // The gateway speaks these, and 2.0.0 for the test of a pair with no common version.
    const spoken = [...(versions ?? []), "2.0.0"].map((version) => ({ version, status: "current" as const }));
    gw = await startTestGateway(versions ? { protocolVersions: spoken } : {});
    const extra = versions ? { protocolVersions: versions } : {};
    alpha = await gw.register("agent-alpha", "principal-a", extra);
    beta = await gw.register("agent-beta", "principal-b", extra);
    gamma = await gw.register("agent-gamma", "principal-c", extra);
  };
  /**
   * The messages waiting for `agent`: what reaches its socket before a later notification from
   * `peer`, a pair that completed the handshake (each acknowledged; the socket closed again).
   */
  const inboxOf = async (agent: TestAgent, peer: TestAgent): Promise<string[]> => {
    const ws = await FrameClient.connect(gw.gateway.wsUrl, agent.apiKey);
    await ws.next("ready");
    const ids = await deliveredBefore(ws, gw, peer, agent.sender.agentId);
    await ws.close();
    return ids;
  };

  it("refuses an API key signing as another agent", async () => {
    await start();
    await handshake(gw, alpha, gamma);
    await handshake(gw, beta, gamma);
    await inboxOf(gamma, alpha);
    const attempts = new Attempts();
    const asBeta = signMessage(buildNotification(beta.sender, "agent-gamma", { forged: 1 }), beta.signer);
    attempts.add(
      "beta's envelope, alpha's key",
      await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: asBeta }),
      [403, ErrorCode.Forbidden],
    );
    const claim = signMessage(buildNotification(beta.sender, "agent-gamma", { forged: 2 }), alpha.signer);
    attempts.add(
      "agent-id beta, signed by alpha",
      await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: claim }),
      [403, ErrorCode.Forbidden],
    );
    const wrongKey = signMessage(buildNotification(alpha.sender, "agent-gamma", { forged: 3 }), beta.signer);
    attempts.add(
      "agent-id alpha, signed by beta",
      await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: wrongKey }),
      [401, ErrorCode.SignatureInvalid],
    );
    const ws = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    await ws.next("ready");
    ws.send({ type: "submit", ref: "forged", envelope: asBeta });
    const wsAnswer = await ws.next("error", (f) => f.ref === "forged");
    await ws.close();
    attempts.add(
      "beta's envelope on alpha's socket",
      { status: 403, headers: new Headers(), json: { error: wsAnswer.error } },
      [403, ErrorCode.Forbidden],
    );
    const delivered = await inboxOf(gamma, alpha);
    attempts.report("impersonation", { deliveredToTarget: delivered.length });
    expect(delivered).toEqual([]);
  });

  it("keeps another agent's messages out of reach", async () => {
    await start();
    await handshake(gw, beta, gamma);
    await handshake(gw, beta, alpha);
    await inboxOf(alpha, beta);
    const sent = await submit(
      gw,
      beta,
      buildNotification(beta.sender, "agent-gamma", { secret: "for gamma" }),
    );
    const id = sent.json.id as string;
    const attempts = new Attempts();
    const asAlpha = { apiKey: alpha.apiKey };
    attempts.add("read", await api(gw.url, `/api/v1/messages/${id}?from=agent-beta`, asAlpha), [
      404,
      ErrorCode.NotFound,
    ]);
    attempts.add("status", await api(gw.url, `/api/v1/messages/${id}/status?from=agent-beta`, asAlpha), [
      404,
      ErrorCode.NotFound,
    ]);
    attempts.add(
      "acknowledge",
      await api(gw.url, `/api/v1/messages/${id}/acknowledge?from=agent-beta`, { ...asAlpha, method: "POST" }),
      [404, ErrorCode.NotFound],
    );
    attempts.add(
      "sender acknowledging for the recipient",
      await api(gw.url, `/api/v1/messages/${id}/acknowledge?from=agent-beta`, {
        apiKey: beta.apiKey,
        method: "POST",
      }),
      [403, ErrorCode.Forbidden],
    );
    const listed = await api(
      gw.url,
      "/api/v1/messages?to_agent_id=agent-gamma&from_agent_id=agent-beta",
      asAlpha,
    );
    const alphaInbox = await inboxOf(alpha, beta);
    const gammaInbox = await inboxOf(gamma, beta);
    attempts.report("inbox-reading", {
      listedForAlpha: (listed.json.items as unknown[]).length,
      alphaDeliveries: alphaInbox.length,
    });
    expect(listed.json.items).toEqual([]);
    expect(alphaInbox).toEqual([]);
    expect(gammaInbox).toContain(id);
  });

  it("refuses registering, rotating and revoking without the admin token", async () => {
    await start();
    const attempts = new Attempts();
    const body = { agentId: "agent-intruder", principalId: "p", signing: alpha.identity.signing };
    attempts.add("register, no credentials", await api(gw.url, "/api/v1/agents", { body }), [
      401,
      ErrorCode.Unauthorized,
    ]);
    attempts.add("register, agent key", await api(gw.url, "/api/v1/agents", { body, apiKey: alpha.apiKey }), [
      403,
      ErrorCode.Forbidden,
    ]);
    attempts.add(
      "register, wrong token",
      await api(gw.url, "/api/v1/agents", { body, headers: { authorization: "Bearer acpadm_guess" } }),
      [401, ErrorCode.Unauthorized],
    );
    attempts.add(
      "rotate another agent's key",
      await api(gw.url, "/api/v1/agents/agent-beta/rotate", { apiKey: alpha.apiKey, method: "POST" }),
      [403, ErrorCode.Forbidden],
    );
    attempts.add(
      "revoke, agent key",
      await api(gw.url, "/api/v1/agents/agent-beta/revoke", { apiKey: alpha.apiKey, method: "POST" }),
      [403, ErrorCode.Forbidden],
    );
    const upgrade = await new Promise<number>((resolve) => {
      const ws = new WebSocket(gw.gateway.wsUrl, { headers: { authorization: "Bearer acpadm_guess" } });
      ws.on("close", (code) => resolve(code));
      ws.on("error", () => undefined);
    });
    const registered = await api(gw.url, "/api/v1/agents/agent-intruder", { apiKey: alpha.apiKey });
    attempts.report("admin", { unauthenticatedSocketClose: upgrade });
    expect(upgrade).toBe(4401);
    expect(registered.status).toBe(404);
    expect((await api(gw.url, "/api/v1/agents", { apiKey: beta.apiKey })).status).toBe(200);
  });

  it("refuses every replay of a captured envelope and delivers the original once", async () => {
    await start();
    await handshake(gw, alpha, beta);
    await inboxOf(beta, alpha);
    const captured = signMessage(buildNotification(alpha.sender, "agent-beta", { pay: 10 }), alpha.signer);
    const original = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: captured });
    expect(original.status).toBe(202);
    const attempts = new Attempts();
    const again = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: captured });
    attempts.add(
      "same bytes, another key",
      await api(gw.url, "/api/v1/messages", { apiKey: beta.apiKey, body: captured }),
      [403, ErrorCode.Forbidden],
    );
    const reused = buildNotification(
      alpha.sender,
      "agent-beta",
      { pay: 1000 },
      { messageId: captured.params.headers["message-id"] },
    );
    attempts.add("same id, new content, re-signed", await submit(gw, alpha, reused), [409, ErrorCode.Replay]);
    const rerouted = {
      ...captured,
      params: { ...captured.params, headers: { ...captured.params.headers, "recipient-id": "agent-gamma" } },
    };
    attempts.add(
      "same bytes, re-addressed",
      await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: rerouted }),
      [401, ErrorCode.SignatureInvalid],
    );
    const old = signMessage(
      buildNotification(alpha.sender, "agent-beta", { pay: 10 }, { now: new Date(Date.now() - 60 * 60_000) }),
      alpha.signer,
    );
    attempts.add(
      "an hour-old capture",
      await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: old }),
      [400, ErrorCode.StaleTimestamp],
    );
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    const delivered = await receive(ws, 1);
    const extra = (await deliveredBefore(ws, gw, alpha, "agent-beta")).length;
    await ws.close();
    attempts.report("replay", { identicalResubmission: again.status, deliveries: delivered.length + extra });
    expect(again.json).toMatchObject({ id: original.json.id, duplicate: true });
    expect(delivered).toEqual([original.json.id]);
    expect(extra).toBe(0);
  });

  it("refuses a protocol downgrade and a pair with no common version", async () => {
    await start(["1.0.0", "1.1.0"]);
    const legacy = await gw.register("agent-legacy", "principal-l", { protocolVersions: ["2.0.0"] });
    const attempts = new Attempts();
    const caps = { capabilities: [], purpose: "p" };
    const v = (version: string) => ({ ...alpha.sender, trustLayerVersion: version });
    attempts.add(
      "declares 1.0.0 where 1.1.0 is agreed",
      await submit(gw, alpha, buildAnnounce(v("1.0.0"), "agent-beta", caps)),
      [400, ErrorCode.NoCommonVersion],
    );
    attempts.add(
      "declares a version nobody has",
      await submit(gw, alpha, buildAnnounce(v("9.9.9"), "agent-beta", caps)),
      [400, ErrorCode.NoCommonVersion],
    );
    attempts.add(
      "no common version",
      await submit(gw, alpha, buildAnnounce(v("1.1.0"), "agent-legacy", caps)),
      [400, ErrorCode.NoCommonVersion],
    );
    const agreed = await submit(gw, alpha, buildAnnounce(v("1.1.0"), "agent-beta", caps));
    attempts.report("downgrade", { agreedVersionAccepted: agreed.status });
    expect(agreed.status).toBe(202);
    void legacy;
  });
});
