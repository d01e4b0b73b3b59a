/**
 * Messages the gateway signs on a custodial agent's behalf, with the key it holds for the agent
 * (registry.custodian, src/extensions/custody): the agent's side of the handshake, and the messages
 * its REST clients send in the messaging platform's shape (platform-message.ts). Each is then
 * submitted through the relay like any agent's, so the handshake gate, persistence and audit apply;
 * the relay audit marks it as signed in custody.
 */
import {
  buildAnnounce,
  buildCapabilities,
  createSigner,
  type MethodMessage,
  signMessage,
} from "../protocol/index.js";
import { negotiateVersion } from "../wire/versions.js";
import type { AgentRecord, Custodian, Registry, ResolvedAgent } from "./registry.js";
import type { SubmitResponse } from "../wire/api.js";
import type { Relay } from "./relay.js";
import type { SubmitOptions } from "./relay-types.js";

/** The skill layers a custodial agent declares, in its handshake and in every message signed for it. */
export const CUSTODIAL_LAYERS = [0, 1];

export type CustodialSender = ReturnType<typeof custodialSender>;

/** The custodial agent as a message's sender towards `peer`: the version both speak, if any. */
export function custodialSender(registry: Registry, self: AgentRecord, peer: AgentRecord) {
  const { versions } = registry;
  const trustLayerVersion = negotiateVersion(
    versions.usable(self.protocolVersions),
    versions.usable(peer.protocolVersions),
  );
  return {
    agentId: self.agentId,
    principalId: self.principalId,
    layers: CUSTODIAL_LAYERS,
    ...(trustLayerVersion !== undefined && { trustLayerVersion }),
  };
}

/** Step 1 of the handshake for a custodial agent (a `reply` when it answers a peer's announce). */
export function custodialAnnounce(sender: CustodialSender, self: AgentRecord, peer: string, reply: boolean) {
  return buildAnnounce(sender, peer, {
    capabilities: self.capabilities,
    purpose: `${self.agentId} works for ${self.principalId} through MCP and REST clients; the gateway holds its key`,
    ...(reply && { reply: true }),
  });
}

/** Step 3 of the handshake for a custodial agent: what it offers (nothing but what its clients do). */
export function custodialCapabilities(sender: CustodialSender, self: AgentRecord, peer: string) {
  return buildCapabilities(sender, peer, {
    tools: [],
    domains: self.capabilities,
    limits: ["acts only through the gateway (MCP task tools, REST messages); answers no requests"],
    requests: [],
  });
}

/** Signs `messages` with the custodial agent's key and submits them through the relay, in order. */
export async function submitInCustody(
  custodian: Custodian,
  relay: Relay,
  self: ResolvedAgent,
  messages: MethodMessage[],
  options: SubmitOptions = {},
): Promise<SubmitResponse[]> {
  const signer = createSigner(await custodian.identity(self.record.agentId));
  const results: SubmitResponse[] = [];
  for (const message of messages) {
    const text = JSON.stringify(signMessage(message, signer));
    results.push(await relay.submit(self, text, Buffer.byteLength(text), options));
  }
  return results;
}
