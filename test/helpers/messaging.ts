/**
 * Messaging through a test gateway as a raw client (no SDK): submit a signed message, run both
 * sides of a handshake, drain and acknowledge deliveries, read an answer's JSON-RPC error.
 */
import { expect } from "vitest";
import {
  buildAnnounce,
  buildCapabilities,
  buildNotification,
  signMessage,
} from "../../src/protocol/index.js";
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

/**
 * The positive barrier before "nothing else arrived": sends `to` a later notification from `from`
 * and drains `ws` (acknowledging) until it arrives. An inbox delivers in order, so anything queued
 * before it has come by then. Returns the ids of the messages that came before it.
 */
export async function deliveredBefore(
  ws: FrameClient,
  gw: TestGateway,
  from: TestAgent,
  to: string,
): Promise<string[]> {
  const later = buildNotification(from.sender, to, { barrier: true });
  const accepted = await submit(gw, from, later);
  expect(accepted.status, JSON.stringify(accepted.json)).toBe(202);
  const before: string[] = [];
  for (;;) {
    const frame = await ws.next("new_message");
    ws.send({ type: "acknowledge", id: frame.id, from: frame.from });
    if (frame.id === later.params.headers["message-id"]) return before;
    before.push(frame.id);
  }
}
