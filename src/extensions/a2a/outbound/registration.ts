import type { JsonWebKey } from "node:crypto";
import { z } from "zod";
import type { Registry } from "../../../gateway/registry.js";
import { AcpError, AgentId, PrincipalId } from "../../../protocol/index.js";

import type { OutboundAgentRecord } from "../../../wire/a2a-outbound.js";
import type { BridgeIdentity } from "../bridge-identity.js";
import { fetchAgentCard, jsonRpcEndpoint } from "./card.js";
import { verifyCardSignatures } from "./card-signature.js";

export const RegisterOutboundRequest = z.strictObject({
  url: z.string().min(1, "give the A2A agent's URL or its agent card URL"),
  agentId: AgentId.optional(),
  principalId: PrincipalId.optional(),
  /** Public JWKs the card must be signed with (pinned keys); else a signed card's `jku` on its own origin. */
  cardKeys: z.array(z.record(z.string(), z.unknown())).min(1).optional(),
});
export type RegisterOutboundRequest = z.infer<typeof RegisterOutboundRequest>;

/** `Echo Agent` → `a2a-echo-agent`: a valid ACP agent id (no `:` or `.`, which name NATS subjects). */
export function defaultAgentId(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 100);
  return `a2a-${slug || "agent"}`;
}

/**
 * Fetches, validates and verifies the card, then registers the agent id in the gateway's registry
 * with the bridge key (so ACP agents find it, verify its signatures and handshake it like any agent).
 */
export async function registerOutbound(
  input: unknown,
  registry: Registry,
  identity: BridgeIdentity,
  now = new Date(),
): Promise<OutboundAgentRecord> {
  const parsed = RegisterOutboundRequest.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => ({ path: `/${i.path.join("/")}`, message: i.message }));
    throw new AcpError(
      "InvalidParams",
      `invalid A2A agent registration: ${problems[0]?.path} ${problems[0]?.message}`,
      {
        problems,
      },
    );
  }
  const request = parsed.data;
  const fetched = await fetchAgentCard(request.url);
  const endpoint = jsonRpcEndpoint(fetched.card);
  const signature = await verifyCardSignatures(fetched.raw, fetched.card.signatures ?? [], {
    cardUrl: fetched.url,
    ...(request.cardKeys ? { pinnedKeys: request.cardKeys as JsonWebKey[] } : {}),
  });
  const agentId = request.agentId ?? defaultAgentId(fetched.card.name);
  const skills = (fetched.card.skills ?? []).map((s) => s.id);
  const principalId = request.principalId ?? `a2a:${new URL(fetched.url).host}`;
  try {
    await registry.register({
      agentId,
      principalId,
      signing: identity.signing,
      capabilities: ["a2a", ...skills],
    });
  } catch (err) {
    if (!(err instanceof AcpError) || err.reason !== "Conflict") throw err;
    throw new AcpError(
      "Conflict",
      `the agent id ${agentId} is taken (a removed agent's id stays reserved for its audit trail); choose another with agentId (--id)`,
      { problems: [{ path: "/agentId", message: "already registered" }] },
    );
  }
  return {
    agentId,
    principalId,
    name: fetched.card.name,
    cardUrl: fetched.url,
    endpoint,
    streaming: fetched.card.capabilities?.streaming === true,
    skills,
    signature,
    bridgeKey: identity.signing.x,
    registeredAt: now.toISOString(),
  };
}
