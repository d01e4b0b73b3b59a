/**
 * Messaging through a test gateway as a raw client (no SDK): submit a signed message, run both
 * sides of a handshake, drain and acknowledge deliveries, read an answer's JSON-RPC error.
 */
import { expect } from "vitest";
import { buildAnnounce, buildCapabilities, signMessage } from "../../src/protocol/index.js";
import { api, type FrameClient, type TestAgent, type TestGateway } from "./gateway.js";

/** The capabilities `handshake` exchanges (a scheduling agent's). */
export const SCHEDULING_CAPABILITIES = {
  tools: ["calendar"],
  domains: ["scheduling"],
  limits: [],
  requests: [],
};

export function submit(gw: TestGateway, from: TestAgent, message: object, apiKey = from.apiKey) {
  return api(gw.url, "/api/v1/messages", { apiKey, body: signMessage(message, from.signer) });
}

/** Both sides announce and exchange capabilities through the gateway. */
export async function handshake(gw: TestGateway, a: TestAgent, b: TestAgent): Promise<void> {
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    const r = await submit(
      gw,
      x,
      buildAnnounce(x.sender, y.sender.agentId, { capabilities: ["calendar"], purpose: "scheduling" }),
    );
    expect(r.status, JSON.stringify(r.json)).toBe(202);
  }
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    const r = await submit(gw, x, buildCapabilities(x.sender, y.sender.agentId, SCHEDULING_CAPABILITIES));
    expect(r.status, JSON.stringify(r.json)).toBe(202);
  }
}

export function errorOf(json: Record<string, unknown>): {
  code: number;
  message: string;
  data: Record<string, unknown>;
} {
  return json.error as { code: number; message: string; data: Record<string, unknown> };
}

/** Drains `count` new_message frames, acknowledging each; returns their ids in order. */
export async function receive(ws: FrameClient, count: number, method?: string): Promise<string[]> {
  const ids: string[] = [];
  while (ids.length < count) {
    const frame = await ws.next("new_message");
    ws.send({ type: "acknowledge", id: frame.id, from: frame.from });
    if (!method || frame.method === method) ids.push(frame.id);
  }
  return ids;
}
