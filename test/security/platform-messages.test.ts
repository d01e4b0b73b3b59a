/**
 * The messaging platform's unsigned send (`POST /api/v1/messages` with `{recipient_id,
 * message_type, content}`) makes the gateway sign. Replayed: an agent that holds its own key asks
 * the gateway to sign for it (so its message would not carry its own signature), a custodial agent
 * names another sender, and one asks the gateway to sign a protocol exchange (a handshake step, a
 * request). Each is refused naming why, nothing is stored or delivered, and the gateway stays
 * healthy.
 */
import { afterEach, describe, expect, it } from "vitest";
import { api, registerCustodial, startTestGateway, type TestGateway } from "../helpers/gateway.js";

let gw: TestGateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

async function messagesOf(gateway: TestGateway, apiKey: string): Promise<unknown[]> {
  return (await api(gateway.url, "/api/v1/messages", { apiKey })).json.items as unknown[];
}

describe("the gateway signs only for the agents whose keys it holds", () => {
  it("refuses to sign for an agent with its own key, or as another agent, or a protocol exchange", async () => {
    gw = await startTestGateway();
    const alice = await gw.register("alice");
    const bob = await gw.register("bob");
    const custodial = await registerCustodial(gw.url, "worker");
    const workerKey = custodial.json.apiKey as string;

    // alice holds her key: the gateway will not sign for her, and says how to sign.
    const unsigned = await api(gw.url, "/api/v1/messages", {
      apiKey: alice.apiKey,
      body: {
        recipient_id: "bob",
        message_type: "notification",
        content: { text: "hi" },
        priority: "normal",
      },
    });
    expect(unsigned.status, JSON.stringify(unsigned.json)).toBe(400);
    expect(unsigned.json.error).toMatchObject({
      code: -32001,
      message: expect.stringContaining("alice holds its own signing key"),
      data: {
        reason: "SignatureMissing",
        expected: expect.stringContaining("signed ACP message"),
        how: expect.arrayContaining([expect.stringContaining("acp send --key")]),
      },
    });

    // The custodial worker cannot name another sender, nor have a handshake step or a request signed.
    for (const body of [
      { recipient_id: "bob", message_type: "notification", content: {}, sender_id: "alice" },
      { recipient_id: "bob", message_type: "notification", content: {}, from: "alice" },
      { recipient_id: "bob", message_type: "announce", content: { capabilities: [] } },
      { recipient_id: "bob", message_type: "capabilities", content: {} },
      { recipient_id: "bob", message_type: "request", content: {} },
    ]) {
      const refused = await api(gw.url, "/api/v1/messages", { apiKey: workerKey, body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.json.error).toMatchObject({ code: -32602 });
    }

    // Nothing was stored for anyone, nothing waits for bob, and the gateway is healthy.
    expect(await messagesOf(gw, alice.apiKey)).toEqual([]);
    expect(await messagesOf(gw, bob.apiKey)).toEqual([]);
    expect(await messagesOf(gw, workerKey)).toEqual([]);
    expect((await api(gw.url, "/healthz")).json).toMatchObject({ status: "ok" });
  });
});
