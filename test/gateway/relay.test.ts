/**
 * The relay's own checks, each where it sits in the pipeline, driven through a real gateway's relay
 * (`context.relay`) so that the options only the gateway's own code passes (a signature made in this
 * process, a message from a peer gateway, when a held-back message was first taken in) and the exact
 * size can be set. The HTTP and WebSocket paths are the gateway suite's (suite.ts).
 */
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import type { ResolvedAgent } from "../../src/gateway/registry.js";
import type { Relay } from "../../src/gateway/relay.js";
import type { AcceptedMessage } from "../../src/gateway/relay-types.js";
import {
  AcpError,
  type AcpMessage,
  buildAnnounce,
  buildErrorResponse,
  buildNotification,
  buildRequest,
  buildResponse,
  signMessage,
} from "../../src/protocol/index.js";
import { peerInbox } from "../../src/extensions/federation/directory.js";
import { MAX_JSON_DEPTH } from "../../src/http/server.js";
import {
  organization,
  removeOrganization,
  startFederatedGateway,
  useOrganizations,
} from "../helpers/federation.js";
import { api, FrameClient, type TestAgent, type TestGateway, startTestGateway } from "../helpers/gateway.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { handshake, receive, submit } from "../helpers/messaging.js";

const gateways: TestGateway[] = [];
const organizations = useOrganizations();
afterEach(async () => {
  for (const gw of gateways.splice(0)) await gw.close();
});

async function open(options: Record<string, unknown> = {}) {
  const gw = await startTestGateway(options);
  gateways.push(gw);
  const alpha = await gw.register("agent-alpha");
  const beta = await gw.register("agent-beta");
  const relay = gw.gateway.context.relay;
  const sender = (await gw.gateway.context.registry.resolve("agent-alpha")) as ResolvedAgent;
  /** Signs `message` as agent-alpha and submits its text through the relay, sized as given (default: its bytes). */
  const send = (message: object, options: Parameters<Relay["submit"]>[3] = {}, size?: number) => {
    const text = JSON.stringify(signMessage(message, alpha.signer));
    return relay.submit(sender, text, size ?? Buffer.byteLength(text), options);
  };
  return { gw, alpha, beta, relay, sender, send };
}

/** agent-alpha's key under another key id: a valid Ed25519 signature that names a key it never registered. */
function underAnotherKid(agent: TestAgent) {
  const kid = `${agent.signer.agentId}#not-its-key`;
  const protectedB64 = Buffer.from(JSON.stringify({ alg: "EdDSA", kid })).toString("base64url");
  return { ...agent.signer, kid, protectedB64 };
}

const bodyOf = (message: AcpMessage) =>
  ("params" in message ? message.params.body : {}) as Record<string, unknown>;
const announceBody = { capabilities: [], purpose: "relay checks" };
const tenMinutesAgo = () => new Date(Date.now() - 10 * 60_000);

describe("the relay", () => {
  it("relays a large handshake message only between agents whose handshake is complete", async () => {
    const { gw, alpha, beta, send } = await open({ quotas: { handshakeBytes: 1024 } });
    const announce = () => buildAnnounce(alpha.sender, "agent-beta", announceBody);
    await expect(send(announce(), {}, 1024)).resolves.toMatchObject({ duplicate: false });
    await expect(send(announce(), {}, 1025)).rejects.toMatchObject({
      kind: "RateLimited",
      message:
        "a handshake message from an agent that has not completed the handshake with agent-beta may be 1024 bytes at most; this one is 1025",
      data: { quota: "handshake-bytes", limit: 1024, size: 1025 },
    });
    expect((await scrapeMetrics(gw.url)).get('acp_quota_refusals_total{quota="handshake-bytes"}')).toBe(1);
    await handshake(gw, alpha, beta);
    await expect(send(announce(), {}, 4096)).resolves.toMatchObject({ duplicate: false });
  });

  it("refuses every new message while storage is below its floor", async () => {
    const { alpha, send } = await open({ quotas: { storageFloorBytes: 1024 ** 6 } });
    await expect(send(buildAnnounce(alpha.sender, "agent-beta", announceBody))).rejects.toMatchObject({
      kind: "StorageUnavailable",
      data: { quota: "storage-free-floor" },
    });
  });

  it("answers a resubmission as a duplicate and a reused id with other content as a replay", async () => {
    const { gw, alpha, beta, relay, sender, send } = await open();
    await handshake(gw, alpha, beta);
    const message = buildNotification(alpha.sender, "agent-beta", { n: 1 });
    const text = JSON.stringify(signMessage(message, alpha.signer));
    const first = await relay.submit(sender, text, text.length);
    await expect(relay.submit(sender, text, text.length)).resolves.toEqual({ ...first, duplicate: true });
    const id = message.params.headers["message-id"];
    const reused = buildNotification(alpha.sender, "agent-beta", { n: 2 }, { messageId: id });
    const other = JSON.stringify(signMessage(reused, alpha.signer));
    await expect(relay.submit(sender, other, other.length)).rejects.toMatchObject({
      kind: "Replay",
      message: `message-id ${id} was already used for a different message`,
      data: { problems: [{ path: "/params/headers/message-id", message: "already used" }] },
    });
    const metrics = await scrapeMetrics(gw.url);
    expect(metrics.get('acp_messages_submitted_total{duplicate="true"}')).toBe(1);
    expect(metrics.get('acp_messages_rejected_total{reason="Replay"}')).toBe(1);
    // Audited once: appends are queued in order, so once a later message's entry is there, any
    // entry of the resubmission would be too.
    const later = await send(buildNotification(alpha.sender, "agent-beta", { n: 3 }));
    const audited = async () => {
      const ids: string[] = [];
      for await (const { entry } of readAudit({
        root: join(gw.dataDir, "relay-audit"),
        agent: "agent-alpha",
      }))
        ids.push(String(entry.messageId ?? entry.id));
      return ids;
    };
    await expect.poll(audited).toContain(later.id);
    expect((await audited()).filter((audit) => audit === id)).toHaveLength(1);
  });

  it("refuses a message whose sender headers are not what the key's agent was registered as, naming the header", async () => {
    const { alpha, send } = await open();
    const asOther = buildAnnounce({ ...alpha.sender, agentId: "agent-beta" }, "agent-alpha", announceBody);
    await expect(send(asOther)).rejects.toMatchObject({
      kind: "Forbidden",
      message: "this API key acts for agent-alpha; it cannot send as agent-beta",
      data: { problems: [{ path: "/params/headers/agent-id", message: "must be agent-alpha" }] },
    });
    const forOther = buildAnnounce(
      { ...alpha.sender, principalId: "someone-else" },
      "agent-beta",
      announceBody,
    );
    await expect(send(forOther)).rejects.toMatchObject({
      kind: "Forbidden",
      message:
        "agent-alpha is registered for principal principal-of-agent-alpha; it cannot act for someone-else",
      data: {
        problems: [{ path: "/params/headers/principal-id", message: "must be principal-of-agent-alpha" }],
      },
    });
  });

  it("refuses an address of another domain when this gateway does not federate, and an arrival for another domain", async () => {
    const { alpha, send } = await open();
    await expect(
      send(buildAnnounce(alpha.sender, "agent-beta@elsewhere.example", announceBody)),
    ).rejects.toMatchObject({
      kind: "UnknownRecipient",
      message:
        "agent-beta@elsewhere.example is an agent of another gateway, and this gateway does not federate (no federation domain)",
      data: { problems: [{ path: "/params/headers/recipient-id", message: "federation is off here" }] },
    });
    const arrived = { via: "_fed_peer_example", maxAgeMs: 60_000 };
    const onward = buildAnnounce(alpha.sender, "agent-beta@elsewhere.example", announceBody);
    await expect(send(onward, { arrived })).rejects.toMatchObject({
      kind: "Misrouted",
      message: "this gateway delivers only to its own agents, not to elsewhere.example",
      data: { problems: [{ path: "/params/headers/recipient-id" }] },
    });
    await expect(send(buildAnnounce(alpha.sender, "agent-nobody", announceBody))).rejects.toMatchObject({
      kind: "UnknownRecipient",
      message: "no agent agent-nobody is registered here",
      data: { problems: [{ path: "/params/headers/recipient-id", message: "not a registered agent" }] },
    });
  });

  it("hands each accepted message's audit entry to its listeners: channel, the answered request, the chat flag", async () => {
    const { gw, alpha, beta, relay, sender: alphaSender } = await open();
    await handshake(gw, alpha, beta);
    const entries: AcceptedMessage["entry"][] = [];
    relay.onAccepted(({ entry }) => entries.push(entry));
    const betaSender = (await gw.gateway.context.registry.resolve("agent-beta")) as ResolvedAgent;
    const submitAs = (sender: ResolvedAgent, agent: TestAgent, message: object) => {
      const text = JSON.stringify(signMessage(message, agent.signer));
      return relay.submit(sender, text, text.length);
    };
    const request = buildRequest(alpha.sender, "agent-beta", { action: "get-availability" });
    await submitAs(alphaSender, alpha, request);
    relay.summariesPostedToChat = true;
    await submitAs(betaSender, beta, buildResponse(beta.sender, request, { slots: 3 }));
    expect(entries.map((e) => [e.channel, e.summary, e.discord_summary])).toEqual([
      ["embedded:agent.agent-beta.inbox", "agent-alpha asked agent-beta for get-availability", false],
      [
        "embedded:agent.agent-alpha.inbox",
        "agent-beta answered agent-alpha's get-availability: slots 3",
        true,
      ],
    ]);
  });

  it("takes a resubmission of a message past retention as a duplicate: there is nothing left to compare", async () => {
    const { gw, alpha, beta, relay, sender } = await open({ retentionMs: 1000 });
    await handshake(gw, alpha, beta);
    const text = JSON.stringify(signMessage(buildNotification(alpha.sender, "agent-beta", {}), alpha.signer));
    const first = await relay.submit(sender, text, text.length);
    await expect
      .poll(async () => (await gw.gateway.broker.get({ from: "agent-alpha", id: first.id }))?.status, {
        timeout: 15_000,
      })
      .toBe("expired");
    await expect(relay.submit(sender, text, text.length)).resolves.toEqual({
      id: first.id,
      status: "expired",
      duplicate: true,
    });
  });

  it("refuses a pair with no common version, and a message in another version than the pair's, naming both", async () => {
    const current = (version: string) => ({ version, status: "current" as const });
    const gw = await startTestGateway({ protocolVersions: ["1.0.0", "1.1.0", "2.0.0"].map(current) });
    gateways.push(gw);
    const a = await gw.register("agent-a", "pa", { protocolVersions: ["1.0.0", "1.1.0"] });
    await gw.register("agent-b", "pb", { protocolVersions: ["1.1.0", "1.0.0"] });
    await gw.register("agent-c", "pc", { protocolVersions: ["2.0.0"] });
    const relay = gw.gateway.context.relay;
    const sender = (await gw.gateway.context.registry.resolve("agent-a")) as ResolvedAgent;
    const send = (message: object) => {
      const text = JSON.stringify(signMessage(message, a.signer));
      return relay.submit(sender, text, text.length);
    };
    await expect(send(buildAnnounce(a.sender, "agent-c", announceBody))).rejects.toMatchObject({
      kind: "NoCommonVersion",
      message: "agent-a and agent-c share no protocol version this gateway still speaks",
      data: { sender: ["1.0.0", "1.1.0"], recipient: ["2.0.0"], supported: ["2.0.0", "1.1.0", "1.0.0"] },
    });
    const inOther = { ...a.sender, trustLayerVersion: "1.0.0" };
    await expect(send(buildAnnounce(inOther, "agent-b", announceBody))).rejects.toMatchObject({
      kind: "NoCommonVersion",
      message: "this pair speaks protocol 1.1.0; 1.0.0 is refused",
      data: {
        negotiated: "1.1.0",
        problems: [{ path: "/params/headers/trust-layer-version", message: "must be 1.1.0" }],
      },
    });
    const inTheirs = { ...a.sender, trustLayerVersion: "1.1.0" };
    await expect(send(buildAnnounce(inTheirs, "agent-b", announceBody))).resolves.toMatchObject({
      duplicate: false,
    });
  });

  it("queues a message at the priority its sender chose, medium when it chose none", async () => {
    const { gw, alpha, beta, send } = await open();
    await handshake(gw, alpha, beta);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
    await receive(ws, 2);
    const urgent = await send(buildNotification(alpha.sender, "agent-beta", { n: 1 }), { priority: "high" });
    const plain = await send(buildNotification(alpha.sender, "agent-beta", { n: 2 }));
    const frames = [await ws.next("new_message"), await ws.next("new_message")];
    expect(frames.map((f) => [f.id, f.priority])).toEqual([
      [urgent.id, "high"],
      [plain.id, "medium"],
    ]);
    await ws.close();
  });

  it("takes an address of its own domain as the local agent, from a sender named by its own address", async () => {
    const org = await organization("here.test");
    const gw = await startFederatedGateway(org, []);
    gateways.push({ ...gw, close: () => gw.close().finally(() => removeOrganization(org)) });
    const alpha = await gw.register("agent-alpha");
    await gw.register("agent-beta");
    const relay = gw.gateway.context.relay;
    const sender = (await gw.gateway.context.registry.resolve("agent-alpha")) as ResolvedAgent;
    const send = (message: object, options: Parameters<Relay["submit"]>[3] = {}) => {
      const text = JSON.stringify(signMessage(message, alpha.signer));
      return relay.submit(sender, text, text.length, options);
    };
    const qualified = {
      ...alpha.sender,
      agentId: "agent-alpha@here.test",
      principalId: "principal-of-agent-alpha@here.test",
    };
    const result = await send(buildAnnounce(qualified, "agent-beta@here.test", announceBody));
    expect(await gw.gateway.broker.get({ from: "agent-alpha", id: result.id })).toMatchObject({
      to: "agent-beta",
    });
    // A local id is still the local agent, named by its own id.
    const local = await send(buildAnnounce(alpha.sender, "agent-beta", announceBody));
    expect(await gw.gateway.broker.get({ from: "agent-alpha", id: local.id })).toMatchObject({
      to: "agent-beta",
    });
    // Named by its address, the recipient is told who wrote in the same terms.
    await expect(
      send(buildAnnounce(alpha.sender, "agent-beta@here.test", announceBody)),
    ).rejects.toMatchObject({
      kind: "Forbidden",
      message: "this API key acts for agent-alpha@here.test; it cannot send as agent-alpha",
    });
    const arrived = { via: "_fed_peer_test", maxAgeMs: 60_000 };
    await expect(
      send(buildAnnounce(alpha.sender, "agent-x@elsewhere.test", announceBody), { arrived }),
    ).rejects.toMatchObject({
      kind: "Misrouted",
      data: { problems: [{ path: "/params/headers/recipient-id", message: "not an agent of here.test" }] },
    });
    // An agent of another domain goes through the federation directory, which knows no such peer.
    await expect(
      send(buildAnnounce(qualified, "agent-x@elsewhere.test", announceBody)),
    ).rejects.toMatchObject({
      kind: "Forbidden",
      message:
        "elsewhere.test is not a peer of here.test (an admin adds it: acp federation add elsewhere.test)",
    });
    const principalOnly = { ...alpha.sender, agentId: "agent-alpha@here.test" };
    await expect(
      send(buildAnnounce(principalOnly, "agent-beta@here.test", announceBody)),
    ).rejects.toMatchObject({
      kind: "Forbidden",
      data: { problems: [{ path: "/params/headers/principal-id" }] },
    });
  });

  it("queues a message for an agent of a peer domain in that domain's outbound queue, checked against its home directory", async () => {
    const { a, b } = await organizations.linkedPair();
    const alpha = await a.register("agent-alpha");
    await b.register("agent-beta");
    const sender = (await a.gateway.context.registry.resolve("agent-alpha")) as ResolvedAgent;
    const qualified = {
      ...alpha.sender,
      agentId: "agent-alpha@a.test",
      principalId: "principal-of-agent-alpha@a.test",
    };
    const text = JSON.stringify(
      signMessage(buildAnnounce(qualified, "agent-beta@b.test", announceBody), alpha.signer),
    );
    const result = await a.gateway.context.relay.submit(sender, text, text.length);
    expect(await a.gateway.broker.get({ from: "agent-alpha", id: result.id })).toMatchObject({
      to: peerInbox("b.test"),
    });
  });

  it("asks for the same again when the broker knows a resubmitted id but cannot read its envelope back", async () => {
    const { gw, alpha, beta, send } = await open();
    await handshake(gw, alpha, beta);
    const message = buildNotification(alpha.sender, "agent-beta", {});
    const first = await send(message);
    // A NATS replica that has not caught up yet answers so; that lag cannot be caused on demand.
    const { broker } = gw.gateway;
    const read = broker.get.bind(broker);
    const lagging = vi.spyOn(broker, "get").mockImplementationOnce(async (ref) => {
      const stored = await read(ref);
      return stored && { ...stored, envelope: null };
    });
    await expect(send(message)).rejects.toMatchObject({
      kind: "StorageUnavailable",
      message: `message-id ${first.id} is stored, but its envelope could not be read back to compare; resubmit`,
      data: { messageId: first.id },
    });
    // Nor when it has not even the record yet.
    lagging.mockImplementationOnce(async () => null);
    await expect(send(message)).rejects.toMatchObject({
      kind: "StorageUnavailable",
      data: { messageId: first.id },
    });
    lagging.mockRestore();
    await expect(send(message)).resolves.toEqual({ ...first, duplicate: true });
  });

  it("tells when a sender last announced itself to a recipient, and stops verifying once closed", async () => {
    const { alpha, relay, send } = await open();
    expect(await relay.announcedAt("agent-alpha", "agent-beta")).toBeUndefined();
    const before = Date.now();
    await send(buildAnnounce(alpha.sender, "agent-beta", announceBody));
    expect(await relay.announcedAt("agent-alpha", "agent-beta")).toBeGreaterThanOrEqual(before - 1000);
    await relay.close();
    await expect(send(buildAnnounce(alpha.sender, "agent-beta", announceBody))).rejects.toThrow(
      "the signature verifier is closed",
    );
  });

  it("relays without a relay audit log when the gateway keeps none", async () => {
    const { gw, alpha, beta, send } = await open({ audit: false });
    await handshake(gw, alpha, beta);
    await expect(send(buildNotification(alpha.sender, "agent-beta", {}))).resolves.toMatchObject({
      duplicate: false,
    });
  });

  it("takes an envelope of exactly the size limit and refuses one byte more, naming the limit", async () => {
    const { gw, alpha, send } = await open({ limits: { maxEnvelopeBytes: 4096 } });
    const announce = () => buildAnnounce(alpha.sender, "agent-beta", announceBody);
    await expect(send(announce(), {}, 4096)).resolves.toMatchObject({ duplicate: false });
    await expect(send(announce(), {}, 4097)).rejects.toMatchObject({
      kind: "PayloadTooLarge",
      message: "the envelope exceeds the 4096-byte limit",
      data: { limit: 4096 },
    });
    const metrics = await scrapeMetrics(gw.url);
    expect(metrics.get('acp_messages_rejected_total{reason="PayloadTooLarge"}')).toBe(1);
    expect(metrics.get('acp_messages_submitted_total{duplicate="false"}')).toBe(1);
  });

  it("refuses a body nested deeper than the limit before validating it", async () => {
    const { alpha, send } = await open();
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < MAX_JSON_DEPTH; i++) deep = { deep };
    await expect(send(buildNotification(alpha.sender, "agent-beta", deep))).rejects.toMatchObject({
      kind: "InvalidRequest",
      message: `the message nests deeper than ${MAX_JSON_DEPTH} levels`,
    });
  });

  it("verifies against the sender's registered key id only: another kid is an unknown key, and the pair stays", async () => {
    const { gw, alpha, beta, send } = await open();
    await handshake(gw, alpha, beta);
    const forged = signMessage(buildNotification(alpha.sender, "agent-beta", {}), underAnotherKid(alpha));
    const refused = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body: forged });
    expect(refused.json.error).toMatchObject({ data: { kid: "agent-alpha#not-its-key" } });
    expect(refused.status).toBe(401);
    // Refused before the handshake gate saw it: the pair did not have to handshake again.
    await expect(send(buildNotification(alpha.sender, "agent-beta", {}))).resolves.toMatchObject({
      duplicate: false,
    });
  });

  it("skips only the Ed25519 verify of a message signed in this process, and only for the sender's own key id", async () => {
    const { gw, alpha, beta, relay, sender } = await open();
    await handshake(gw, alpha, beta);
    const accepted: AcceptedMessage[] = [];
    const stop = relay.onAccepted((message) => accepted.push(message));
    relay.onAccepted(() => {
      throw new Error("a listener's failure is its own");
    });
    const text = (message: object, signer = alpha.signer) => JSON.stringify(signMessage(message, signer));

    const here = text(buildNotification(alpha.sender, "agent-beta", { n: 1 }));
    await expect(relay.submit(sender, here, here.length, { signedHere: true })).resolves.toMatchObject({
      duplicate: false,
    });
    const verified = text(buildNotification(alpha.sender, "agent-beta", { n: 2 }));
    await relay.submit(sender, verified, verified.length);
    expect(accepted.map((a) => [a.id, bodyOf(a.message), a.verifiedKid, a.to])).toEqual([
      [JSON.parse(here).params.headers["message-id"], { n: 1 }, undefined, "agent-beta"],
      [JSON.parse(verified).params.headers["message-id"], { n: 2 }, sender.kid, "agent-beta"],
    ]);
    expect(await accepted[0]?.stored).toMatchObject({ duplicate: false });

    // Claiming "signed here" for a signature naming another key id does not skip the verify.
    const other = text(buildNotification(alpha.sender, "agent-beta", { n: 3 }), underAnotherKid(alpha));
    await expect(relay.submit(sender, other, other.length, { signedHere: true })).rejects.toMatchObject({
      kind: "UnknownKey",
    });
    stop();
    const after = text(buildNotification(alpha.sender, "agent-beta", { n: 4 }));
    await relay.submit(sender, after, after.length);
    expect(accepted).toHaveLength(2);
  });

  it("refuses a sender revoked after its connection signed in, naming the agent-id header", async () => {
    const { gw, alpha, send } = await open();
    const revoked = await api(gw.url, "/api/v1/agents/agent-alpha/revoke", {
      method: "POST",
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    expect(revoked.status).toBe(200);
    await expect(send(buildAnnounce(alpha.sender, "agent-beta", announceBody))).rejects.toMatchObject({
      kind: "Unauthorized",
      message: "agent agent-alpha was revoked (or its signing key replaced) after this connection signed in",
      data: {
        problems: [{ path: "/params/headers/agent-id", message: "no longer a live registered agent" }],
      },
    });
  });

  it("judges freshness by the gateway's configured clock skew", async () => {
    const { gw, alpha, beta, send } = await open({ skewMs: 60_000 });
    await handshake(gw, alpha, beta);
    const twoMinutesAgo = new Date(Date.now() - 2 * 60_000);
    await expect(
      send(buildNotification(alpha.sender, "agent-beta", {}, { now: twoMinutesAgo })),
    ).rejects.toMatchObject({ kind: "StaleTimestamp" });
    await expect(send(buildNotification(alpha.sender, "agent-beta", {}))).resolves.toMatchObject({
      duplicate: false,
    });
  });

  it("validates what a relayed envelope needs: a signature and its routing headers", async () => {
    const { gw, alpha, beta, relay, sender, send } = await open();
    await handshake(gw, alpha, beta);
    const unsigned = JSON.stringify(buildNotification(alpha.sender, "agent-beta", {}));
    await expect(relay.submit(sender, unsigned, unsigned.length)).rejects.toMatchObject({
      kind: "SignatureMissing",
      data: { problems: [{ path: "/signature", message: "every relayed message must be signed" }] },
    });
    const unnamed = buildNotification(alpha.sender, "agent-beta", {});
    delete (unnamed.params.headers as Record<string, unknown>)["message-id"];
    await expect(send(unnamed)).rejects.toMatchObject({
      kind: "InvalidParams",
      data: {
        problems: [{ path: "/params/headers/message-id", message: "is required on a relayed envelope" }],
      },
    });
  });

  it("judges a held-back message's freshness at the time the gateway first took it in", async () => {
    const { gw, alpha, beta, send } = await open();
    await handshake(gw, alpha, beta);
    const old = () => buildNotification(alpha.sender, "agent-beta", {}, { now: tenMinutesAgo() });
    await expect(send(old())).rejects.toMatchObject({ kind: "StaleTimestamp" });
    await expect(send(old(), { receivedAt: tenMinutesAgo().getTime() })).resolves.toMatchObject({
      duplicate: false,
    });
  });

  it("takes a message from a peer gateway as old as the peer's queue kept it, stored as from the peer, after its arrival checks", async () => {
    const { gw, alpha, beta, relay, send } = await open();
    await handshake(gw, alpha, beta);
    const arrived = { via: "_fed_peer_example", maxAgeMs: 60 * 60_000 };
    const checked: string[] = [];
    const removeCheck = relay.onArrival(async ({ message, headers }) => {
      checked.push(headers["message-id"]);
      if (bodyOf(message).refuse) throw new AcpError("Forbidden", "the arrival check refused it");
      if (bodyOf(message).crash) throw new Error("the arrival check failed");
    });

    const old = buildNotification(alpha.sender, "agent-beta", { n: 1 }, { now: tenMinutesAgo() });
    const result = await send(old, { arrived });
    expect(result).toMatchObject({ duplicate: false });
    const stored = await gw.gateway.broker.get({ from: arrived.via, id: result.id });
    expect(stored).toMatchObject({ from: arrived.via, to: "agent-beta" });
    expect(checked).toEqual([result.id]);
    // Forwarded again (the peer did not hear the answer): the same message, stored once.
    await expect(send(old, { arrived })).resolves.toEqual({ ...result, duplicate: true });

    const tooOld = buildNotification(alpha.sender, "agent-beta", {}, { now: tenMinutesAgo() });
    await expect(send(tooOld, { arrived: { ...arrived, maxAgeMs: 60_000 } })).rejects.toMatchObject({
      kind: "StaleTimestamp",
    });
    await expect(
      send(buildNotification(alpha.sender, "agent-beta", { refuse: true }), { arrived }),
    ).rejects.toMatchObject({ message: "the arrival check refused it" });
    await expect(
      send(buildNotification(alpha.sender, "agent-beta", { crash: true }), { arrived }),
    ).rejects.toThrow("the arrival check failed");
    const metrics = await scrapeMetrics(gw.url);
    expect(metrics.get('acp_messages_rejected_total{reason="InternalError"}')).toBe(1);
    expect(metrics.get('acp_messages_rejected_total{reason="Forbidden"}')).toBe(1);
    // No refusal here was a quota's.
    expect([...metrics.keys()].filter((name) => name.startsWith("acp_quota_refusals_total"))).toEqual([]);
    // A local submission is not an arrival: the checks do not run for it.
    const local = await send(buildNotification(alpha.sender, "agent-beta", { refuse: true }));
    expect(local).toMatchObject({ duplicate: false });
    removeCheck();
    await send(buildNotification(alpha.sender, "agent-beta", { refuse: true }), { arrived });
    expect(checked).toHaveLength(4);
  });

  it("relays an error response while the pair re-handshakes, as it does a response", async () => {
    const { gw, alpha, beta } = await open();
    await handshake(gw, alpha, beta);
    const request = buildRequest(alpha.sender, "agent-beta", { action: "forbidden" });
    expect((await submit(gw, alpha, request)).status).toBe(202);
    const again = buildAnnounce(beta.sender, "agent-alpha", { capabilities: [], purpose: "again" });
    expect((await submit(gw, beta, again)).status).toBe(202);
    const denial = buildErrorResponse(beta.sender, request, { code: -32021, message: "not allowed" });
    const answer = await submit(gw, beta, denial);
    expect(answer.status, JSON.stringify(answer.json)).toBe(202);
    const stored = await gw.gateway.broker.get({ from: "agent-beta", id: answer.json.id as string });
    expect(stored).toMatchObject({ method: "error", kind: "response" });
    const response = await submit(gw, beta, buildResponse(beta.sender, request, { ok: true }));
    expect(response.status, JSON.stringify(response.json)).toBe(202);
    const answered = await gw.gateway.broker.get({ from: "agent-beta", id: response.json.id as string });
    expect(answered).toMatchObject({ method: "response", kind: "response" });
  });
});
