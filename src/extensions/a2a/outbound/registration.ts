import type { JsonWebKey } from "node:crypto";
import { z } from "zod";
import type { Registry } from "../../../gateway/registry.js";
import { displayUrl, type OutboundPolicy, OutboundUrlRefused } from "../../../http/outbound.js";
import { AcpError, AgentId, PrincipalId, problemsOf } from "../../../protocol/index.js";

import { A2A_CAPABILITY } from "../../../wire/a2a.js";
import { acceptingDeprecatedNames, OPAQUE_FIELDS } from "../../../wire/deprecated-names.js";
import { A2A_REMOTE_CAPABILITY, type OutboundAgentRecord } from "../../../wire/a2a-outbound.js";
import type { BridgeSigningKey } from "./bridge-key.js";
import { A2A_VERSION, fetchAgentCard, jsonRpcEndpoint } from "./card.js";
import { verifyCardSignatures } from "./card-signature.js";
import { Credentials, credentialHeaders, missingCredentials } from "./credentials.js";

/** What the admin writes as it is: JWKs (`x5t#S256`) and HTTP header names (`X-API-Key`). */
const REGISTRATION_OPAQUE: ReadonlySet<string> = new Set([...OPAQUE_FIELDS, "card_keys", "headers"]);

/**
 * POST /api/v1/a2a/remote-agents: snake_case; the camelCase names (`agentId`, `cardKeys`,
 * `endpointOrigin`…) are read too, for the deprecation period.
 */
export const RegisterOutboundRequest = acceptingDeprecatedNames(
  z.strictObject({
    url: z.string().min(1, "give the A2A agent's URL or its agent card URL"),
    agent_id: AgentId.optional(),
    principal_id: PrincipalId.optional(),
    /** Public JWKs the card must be signed with (pinned keys); else a signed card's `jku` on its own origin. */
    card_keys: z.array(z.record(z.string(), z.unknown())).min(1).optional(),
    /** For an agent whose card declares security: headers and/or a bearer token (sealed at rest). */
    credentials: Credentials.optional(),
    /**
     * The origin of the card's JSON-RPC endpoint when it is not the card's own (`https://api.example`):
     * the admin vouches that it is the agent's. Without it such a card is refused.
     */
    endpoint_origin: z
      .string()
      .refine(isOrigin, "must be an origin: http(s)://host[:port], no path")
      .transform((origin) => new URL(origin).origin)
      .optional(),
  }),
  REGISTRATION_OPAQUE,
);

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
 * What the registry lists for an external A2A agent: `a2a-remote` and its card's skill ids, never
 * `a2a` (which would publish it back to A2A clients as if it were an ACP agent; a skill may be so named).
 */
export function remoteCapabilities(skills: readonly string[]): string[] {
  return [A2A_REMOTE_CAPABILITY, ...skills.filter((skill) => skill !== A2A_CAPABILITY)];
}

/**
 * Fetches (with the credentials given), validates and verifies the card, checks its endpoint against
 * the gateway's outbound URL policy, then registers the agent id in the gateway's registry with the
 * bridge key (so ACP agents find it, verify its signatures and handshake it like any agent). Returns
 * the record and the credentials' headers, to be sealed.
 */
export async function registerOutbound(
  input: unknown,
  { registry, outbound }: { registry: Registry; outbound: OutboundPolicy },
  identity: BridgeSigningKey,
  now = new Date(),
): Promise<{ record: OutboundAgentRecord; headers: Record<string, string> }> {
  const parsed = RegisterOutboundRequest.safeParse(input);
  if (!parsed.success) {
    const problems = problemsOf(parsed.error);
    throw new AcpError(
      "InvalidParams",
      `invalid A2A agent registration: ${problems[0]?.path} ${problems[0]?.message}`,
      {
        problems,
      },
    );
  }
  const request = parsed.data;
  const headers = request.credentials ? credentialHeaders(request.credentials) : {};
  const fetched = await fetchAgentCard(request.url, outbound, { headers });
  const endpoint = jsonRpcEndpoint(fetched.card);
  checkEndpointOrigin(fetched.url, endpoint, request.endpoint_origin);
  await checkEndpoint(endpoint, outbound);
  const signature = await verifyCardSignatures(fetched.raw, fetched.card.signatures ?? [], {
    cardUrl: fetched.url,
    outbound,
    ...(request.card_keys ? { pinnedKeys: request.card_keys as JsonWebKey[] } : {}),
  });
  // Cards are usually public: one that asks for credentials on calls is registered, with a warning.
  const missing = missingCredentials(fetched.card, Object.keys(headers));
  const agentId = request.agent_id ?? defaultAgentId(fetched.card.name);
  const skills = (fetched.card.skills ?? []).map((s) => s.id);
  const principalId = request.principal_id ?? `a2a:${new URL(fetched.url).host}`;
  try {
    await registry.register({
      agent_id: agentId,
      principal_id: principalId,
      signing: identity.signing,
      capabilities: remoteCapabilities(skills),
    });
  } catch (err) {
    if (!(err instanceof AcpError) || err.kind !== "Conflict") throw err;
    throw new AcpError(
      "Conflict",
      `the agent id ${agentId} is taken (a removed agent's id stays reserved for its audit trail); choose another with agent_id (--id)`,
      { problems: [{ path: "/agent_id", message: "already registered" }] },
    );
  }
  const record: OutboundAgentRecord = {
    agentId,
    principalId,
    name: fetched.card.name,
    cardUrl: fetched.url,
    endpoint: endpoint.url,
    ...(request.endpoint_origin !== undefined && { endpointOrigin: request.endpoint_origin }),
    ...(endpoint.protocolVersion !== A2A_VERSION && { protocolVersion: endpoint.protocolVersion }),
    streaming: fetched.card.capabilities?.streaming === true,
    skills,
    signature,
    bridgeKey: identity.signing.x,
    ...(Object.keys(headers).length > 0 && { credentials: Object.keys(headers) }),
    ...(missing !== undefined && { warnings: [missing] }),
    registeredAt: now.toISOString(),
  };
  return { record, headers };
}

/**
 * The bridge sends the agent's credentials and every caller's text to the endpoint, so a card may
 * not point it elsewhere: the endpoint shares the card's origin, or is on the origin the admin named
 * (`endpoint_origin`), and a card served over https never has its calls go over http. Checked at
 * registration and again before a stored record is served.
 */
export function checkEndpointOrigin(
  cardUrl: string,
  endpoint: { url: string; path: string },
  allowedOrigin: string | undefined,
): void {
  const card = new URL(cardUrl);
  const target = new URL(endpoint.url);
  if (card.protocol === "https:" && target.protocol !== "https:") {
    throw new AcpError(
      "InvalidParams",
      `the agent card was served over https but names an http JSON-RPC endpoint (${displayUrl(target)}): the bridge never sends the credentials and callers' text in the clear after fetching the card securely`,
      { problems: [{ path: endpoint.path, message: "https card, http endpoint" }] },
    );
  }
  if (target.origin === card.origin || target.origin === allowedOrigin) return;
  throw new AcpError(
    "InvalidParams",
    `the agent card at ${card.origin} names its JSON-RPC endpoint on another origin, ${target.origin}, where the bridge would send the agent's credentials and every caller's text; if that origin is the agent's, register it with endpoint_origin (--endpoint-origin ${target.origin})`,
    { problems: [{ path: endpoint.path, message: "not on the card's origin" }] },
  );
}

function isOrigin(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (
    (url.protocol === "https:" || url.protocol === "http:") &&
    url.pathname === "/" &&
    url.search === "" &&
    url.hash === "" &&
    url.username === ""
  );
}

/** The endpoint is called with the credentials on every request: refused now, rather than at each call. */
async function checkEndpoint(
  endpoint: { url: string; path: string },
  outbound: OutboundPolicy,
): Promise<void> {
  try {
    await outbound.check(endpoint.url);
  } catch (err) {
    const reason =
      err instanceof OutboundUrlRefused ? err.reason : `cannot be resolved (${(err as Error).message})`;
    throw new AcpError(
      "InvalidParams",
      `the agent card's JSON-RPC endpoint ${displayUrl(endpoint.url)} ${reason}`,
      {
        problems: [{ path: endpoint.path, message: reason }],
      },
    );
  }
}
