/**
 * The messaging platform's own send: `POST /api/v1/messages` with `{recipient_id, message_type,
 * content, priority}`, no signature. A custodial agent's message is signed by the gateway with the
 * key it holds, relayed and audited as gateway-signed; the recipient verifies it like any other.
 */
import { describe, expect, it } from "vitest";
import { type AuditEntry, readAudit } from "../../../src/audit/index.js";
import type { InboundMessage } from "../../../src/client/index.js";
import { api, registerCustodial } from "../../helpers/gateway.js";
import { until, useMcpGateway } from "../../helpers/mcp-gateway.js";

describe("POST /api/v1/messages in the messaging platform's shape", () => {
  const bed = useMcpGateway();

  async function custodial(agentId: string): Promise<string> {
    const res = await registerCustodial(bed.gw.url, agentId);
    expect(res.status).toBe(201);
    return res.json.apiKey as string;
  }

  it("signs a custodial agent's message in custody, starting the handshake it needs, and relays it", async () => {
    const boss = await bed.member("boss");
    const heard: InboundMessage[] = [];
    boss.agent.on("message", (message) => heard.push(message));
    const apiKey = await custodial("worker");
    const body = {
      recipient_id: "boss",
      message_type: "negotiation",
      content: { offer: { price: 80, currency: "EUR" } },
      priority: "normal",
    };

    // No handshake yet: the gateway sends the worker's announce and says to send again.
    const first = await api(bed.gw.url, "/api/v1/messages", { apiKey, body });
    expect(first.status).toBe(409);
    expect(first.json.error).toMatchObject({
      code: -32004,
      message: expect.stringContaining(
        "the gateway sent boss worker's announce; send again once boss has answered it",
      ),
      data: { peer: "boss", handshake: "started", retry: true },
    });
    // boss's SDK answers the announce; the gateway answers for the worker: the handshake completes.
    const sent = await until(
      () => api(bed.gw.url, "/api/v1/messages", { apiKey, body }),
      (res) => res.status === 202,
      "the message goes through once the handshake is complete",
    );
    expect(sent.json).toMatchObject({ status: "queued", duplicate: false, signed_by: "gateway" });

    const received = await until(
      () => heard,
      (h) => h.some((m) => m.method === "agent.negotiation"),
      "boss receives the negotiation",
    );
    const message = received.find((m) => m.method === "agent.negotiation");
    // Verified by boss's SDK against worker's registered key, like any agent's message.
    expect(message).toMatchObject({
      kind: "notification",
      from: "worker",
      principalId: "principal-worker",
      messageId: sent.json.id,
      body: { offer: { price: 80, currency: "EUR" } },
    });
    expect(boss.errors).toEqual([]);

    const entries: AuditEntry[] = [];
    for await (const record of readAudit({ root: `${bed.gw.dataDir}/relay-audit`, agent: "worker" }))
      entries.push(record.entry);
    const relayed = entries.find((e) => e.method === "agent.negotiation");
    expect(relayed).toMatchObject({
      custodial: true,
      summary: expect.stringMatching(/^Signed by the gateway/),
    });
    const status = await api(bed.gw.url, `/api/v1/messages/${sent.json.id}/status`, { apiKey });
    expect(status.json).toMatchObject({ id: sent.json.id, from: "worker", to: "boss" });
  });

  it("names every wrong field, and refuses what needs the sender's own envelope", async () => {
    await bed.member("boss");
    const apiKey = await custodial("worker");
    const post = (body: unknown) => api(bed.gw.url, "/api/v1/messages", { apiKey, body });
    const problems = async (body: unknown) => {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      return ((res.json.error as { data: { problems: { path: string }[] } }).data.problems ?? []).map(
        (p) => p.path,
      );
    };
    expect(
      await problems({ recipient_id: "boss", message_type: "Bad Type", content: [1], priority: "urgent" }),
    ).toEqual(["/message_type", "/content", "/priority"]);
    expect(
      await problems({ recipient_id: "boss", message_type: "status", content: {}, from: "boss" }),
    ).toEqual([""]); // the JSON Pointer of the whole body: an unknown field is a fault of the body
    expect(await problems({ recipient_id: "boss", message_type: "request", content: {} })).toEqual([
      "/message_type",
    ]);
    const unknown = await post({ recipient_id: "nobody", message_type: "status", content: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({
      code: -32014,
      data: { problems: [{ path: "/recipient_id" }] },
    });
    // A signed envelope's priority outside the envelope: named too.
    const badPriority = await api(bed.gw.url, "/api/v1/messages?priority=soon", { apiKey, body: {} });
    expect(badPriority.status).toBe(400);
    expect(badPriority.json.error).toMatchObject({ data: { problems: [{ path: "priority" }] } });
  });
});
