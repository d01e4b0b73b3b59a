/**
 * The A2A agent card (A2A 1.0 §8) of an ACP agent published through the bridge: its skills are the
 * capabilities the agent registered, its one interface is the gateway's JSON-RPC endpoint for it,
 * and its security schemes are the gateway's: an API key (X-API-Key) or the same key as a bearer.
 */
import { AgentCard, type AgentSkill } from "@a2a-js/sdk";
import type { AgentRecord } from "../../../gateway/registry.js";
import { A2A_CAPABILITY, a2aAgentBaseUrl } from "../../../wire/a2a.js";
import { A2A_REMOTE_CAPABILITY } from "../../../wire/a2a-outbound.js";
import { A2A_VERSION_HEADER, A2A_VERSIONS, requestedA2AVersion } from "../json-rpc.js";

/** Where an A2A agent card is, under an agent's base URL or at the origin (RFC 8615). */
export const AGENT_CARD_PATH = "/.well-known/agent-card.json";

const MODES = ["text/plain", "application/json"];

/** Opted in with `a2a`, and not an external A2A agent the outbound bridge answers for. */
export const isPublished = (record: AgentRecord): boolean =>
  !record.revokedAt &&
  record.capabilities.includes(A2A_CAPABILITY) &&
  !record.capabilities.includes(A2A_REMOTE_CAPABILITY);

function skillOf(capability: string, agentId: string): AgentSkill {
  return {
    id: capability,
    name: capability,
    description: `${capability}: a capability ${agentId} announced at its ACP registration`,
    tags: [capability],
    examples: [],
    inputModes: MODES,
    outputModes: MODES,
    securityRequirements: [],
  };
}

export function agentCardOf(record: AgentRecord, publicUrl: string): AgentCard {
  const capabilities = record.capabilities.filter((c) => c !== A2A_CAPABILITY);
  const skills =
    capabilities.length > 0
      ? capabilities.map((c) => skillOf(c, record.agentId))
      : [skillOf("request", record.agentId)];
  return {
    name: record.agentId,
    description:
      `ACP agent ${record.agentId} (principal ${record.principalId}), reached through an ACP gateway: ` +
      "each A2A message becomes a signed, persisted and audited ACP agent.request.",
    // One endpoint, both versions (1.0 preferred): the method names tell their requests apart.
    supportedInterfaces: ["1.0", "0.3"].map((protocolVersion) => ({
      url: a2aAgentBaseUrl(publicUrl, record.agentId),
      protocolBinding: "JSONRPC",
      tenant: "",
      protocolVersion,
    })),
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      apiKey: {
        scheme: {
          $case: "apiKeySecurityScheme",
          value: { description: "An API key issued by the gateway", location: "header", name: "X-API-Key" },
        },
      },
      bearer: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: { description: "The same API key as a bearer token", scheme: "Bearer", bearerFormat: "" },
        },
      },
    },
    securityRequirements: [{ schemes: { apiKey: { list: [] } } }, { schemes: { bearer: { list: [] } } }],
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills,
    signatures: [],
  };
}

/**
 * The same card in A2A 0.3's shape, for clients that send no A2A-Version (A2A 0.3 clients, which
 * look for `url` and `preferredTransport`). Like the A2A SDK's own 0.3 cards it also carries the
 * 1.0 `supportedInterfaces`, for 1.0 clients that did not say which version they read.
 */
export function legacyAgentCardOf(record: AgentRecord, publicUrl: string): Record<string, unknown> {
  const card = agentCardOf(record, publicUrl);
  const [primary] = card.supportedInterfaces;
  return {
    protocolVersion: "0.3.0",
    name: card.name,
    description: card.description,
    version: card.version,
    url: primary?.url,
    preferredTransport: "JSONRPC",
    capabilities: { streaming: true, pushNotifications: true },
    securitySchemes: {
      apiKey: {
        type: "apiKey",
        in: "header",
        name: "X-API-Key",
        description: "An API key issued by the gateway",
      },
      bearer: { type: "http", scheme: "Bearer", description: "The same API key as a bearer token" },
    },
    security: [{ apiKey: [] }, { bearer: [] }],
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills.map(({ id, name, description, tags, inputModes, outputModes }) => ({
      id,
      name,
      description,
      tags,
      inputModes,
      outputModes,
    })),
    supportsAuthenticatedExtendedCard: false,
    supportedInterfaces: (AgentCard.toJSON(card) as { supportedInterfaces: unknown }).supportedInterfaces,
  };
}

/**
 * The answer to a card request that names `asked` as its A2A version: the card in that version's
 * shape, or (a version not spoken) A2A 1.0 §6.4's problem. Always `Vary: A2A-Version`.
 */
export function cardAnswer(
  record: AgentRecord,
  publicUrl: string,
  asked: string,
): { status: number; body: unknown; headers: Record<string, string> } {
  const vary = { vary: A2A_VERSION_HEADER };
  const version = requestedA2AVersion(asked);
  if (version === undefined) {
    return {
      status: 400,
      headers: { ...vary, "content-type": "application/problem+json" },
      body: {
        type: "https://a2a-protocol.org/errors/version-not-supported",
        title: "Protocol Version Not Supported",
        status: 400,
        detail: `A2A version ${JSON.stringify(asked)} is not supported here: send ${A2A_VERSION_HEADER} ${A2A_VERSIONS.join(" or ")}`,
        supportedVersions: [...A2A_VERSIONS],
      },
    };
  }
  const body =
    version === "0.3"
      ? legacyAgentCardOf(record, publicUrl)
      : AgentCard.toJSON(agentCardOf(record, publicUrl));
  return { status: 200, body, headers: { ...vary, "cache-control": "max-age=60" } };
}
