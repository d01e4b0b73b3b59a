import { AgentCard } from "@a2a-js/sdk";
import { isLegacyAgentCard, parseLegacyAgentCard } from "@a2a-js/sdk/compat/v0_3/client";
import { z } from "zod";
import { type OutboundPolicy, OutboundResponseTooLarge, OutboundUrlRefused } from "../../../http/outbound.js";
import { AcpError, problemsOf } from "../../../protocol/index.js";

/**
 * The parts of an A2A 1.0 agent card the outbound bridge relies on, checked before anything is
 * registered. Other members are kept as served (they are covered by the card's signature) but not
 * interpreted. The wire is proto3 JSON: camelCase members, defaults may be left out.
 */
const AgentInterface = z.object({
  url: z.url("must be an absolute URL"),
  protocolBinding: z.string().min(1, "must name the transport (JSONRPC, HTTP+JSON, GRPC)"),
  protocolVersion: z.string().min(1, "must name the A2A protocol version").optional(),
  tenant: z.string().optional(),
});

const AgentSkill = z.object({
  id: z.string().min(1, "must not be empty"),
  name: z.string().min(1, "must not be empty"),
  description: z.string().optional(),
  tags: z.array(z.string()).optional(),
});

const CardSignature = z.object({
  protected: z.string().regex(/^[A-Za-z0-9_-]+$/, "must be a base64url JWS protected header"),
  signature: z.string().regex(/^[A-Za-z0-9_-]+$/, "must be a base64url signature"),
  header: z.record(z.string(), z.unknown()).optional(),
});

export const A2AAgentCard = z.looseObject({
  name: z.string().min(1, "must not be empty"),
  description: z.string().optional(),
  version: z.string().optional(),
  supportedInterfaces: z.array(AgentInterface).min(1, "must list at least one interface"),
  provider: z.object({ organization: z.string().optional(), url: z.string().optional() }).optional(),
  capabilities: z
    .object({ streaming: z.boolean().optional(), pushNotifications: z.boolean().optional() })
    .optional(),
  defaultInputModes: z.array(z.string()).optional(),
  defaultOutputModes: z.array(z.string()).optional(),
  skills: z.array(AgentSkill).optional(),
  signatures: z.array(CardSignature).optional(),
});
export type A2AAgentCard = z.infer<typeof A2AAgentCard>;
export type A2ACardSignature = z.infer<typeof CardSignature>;

/** The A2A protocol version this bridge speaks (the `A2A-Version` header). */
export const A2A_VERSION = "1.0";
export const CARD_PATH = "/.well-known/agent-card.json";

/** The JSON-RPC endpoint the bridge calls: the card's JSONRPC interface for A2A 1.0, else for 0.3. */
export function jsonRpcEndpoint(card: A2AAgentCard): { url: string; protocolVersion: string; path: string } {
  const jsonRpc = card.supportedInterfaces.filter((i) => i.protocolBinding.toUpperCase() === "JSONRPC");
  const found =
    jsonRpc.find((i) => (i.protocolVersion ?? A2A_VERSION) === A2A_VERSION) ??
    jsonRpc.find((i) => /^0\.3(\.|$)/.test(i.protocolVersion ?? ""));
  if (!found) {
    const offered = card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion ?? "?"}`);
    throw new AcpError(
      "CapabilityMissing",
      `the agent card offers no JSONRPC interface for A2A ${A2A_VERSION} or 0.3 (it offers: ${offered.join(", ")})`,
      { problems: [{ path: "/supportedInterfaces", message: `no JSONRPC ${A2A_VERSION} interface` }] },
    );
  }
  return {
    url: found.url,
    protocolVersion: found.protocolVersion ?? A2A_VERSION,
    path: `/card/supportedInterfaces/${card.supportedInterfaces.indexOf(found)}/url`,
  };
}

/** `https://host/x` → `https://host/x/.well-known/agent-card.json`; a URL ending in `.json` is the card itself. */
export function cardUrlOf(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new AcpError("InvalidParams", `not a URL: ${JSON.stringify(url)}`, {
      problems: [{ path: "/url", message: "must be an absolute http(s) URL" }],
    });
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new AcpError("InvalidParams", `the agent URL must be http(s), not ${parsed.protocol}`, {
      problems: [{ path: "/url", message: "must be an absolute http(s) URL" }],
    });
  }
  if (parsed.pathname.endsWith(".json")) return parsed;
  return new URL(`${parsed.pathname.replace(/\/+$/, "")}${CARD_PATH}`, parsed);
}

const CARD_LIMIT = 256 * 1024;

export interface FetchedCard {
  card: A2AAgentCard;
  /** The card exactly as parsed from the wire (its signatures cover this). */
  raw: Record<string, unknown>;
  url: string;
}

/**
 * Fetches (through the gateway's outbound URL policy) and validates an agent card; every failure is
 * an AcpError naming the URL or the field.
 */
export async function fetchAgentCard(
  url: string,
  outbound: OutboundPolicy,
  options: { headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<FetchedCard> {
  const cardUrl = cardUrlOf(url);
  const unfetched = (err: unknown) => {
    const refused = err instanceof OutboundUrlRefused;
    return new AcpError(
      "InvalidParams",
      refused
        ? `the agent card URL ${err.message}`
        : `cannot fetch the agent card at ${cardUrl}: ${causeOf(err)}`,
      { problems: [{ path: "/url", message: refused ? err.reason : "the agent card could not be fetched" }] },
    );
  };
  let response: Response;
  let text: string;
  try {
    response = await outbound.fetch(cardUrl, {
      headers: { ...options.headers, accept: "application/json", "A2A-Version": A2A_VERSION },
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      maxResponseBytes: CARD_LIMIT,
    });
    text = await response.text();
  } catch (err) {
    if (err instanceof OutboundResponseTooLarge) {
      throw new AcpError("InvalidParams", `the agent card at ${cardUrl} exceeds ${CARD_LIMIT} bytes`, {
        problems: [{ path: "/url", message: "card too large" }],
      });
    }
    throw unfetched(err);
  }
  if (response.status === 401 || response.status === 403) {
    const given = Object.keys(options.headers ?? {});
    throw new AcpError(
      "InvalidParams",
      `the agent card at ${cardUrl} answered HTTP ${response.status}: ` +
        (given.length > 0
          ? `the A2A agent refused the credentials given (${given.join(", ")})`
          : "the A2A agent needs credentials: give them with --header-env, --bearer-env or --header (credentials in the body)"),
      {
        problems: [{ path: given.length > 0 ? "/credentials" : "/url", message: `HTTP ${response.status}` }],
      },
    );
  }
  if (!response.ok) {
    throw new AcpError("InvalidParams", `the agent card at ${cardUrl} answered HTTP ${response.status}`, {
      problems: [{ path: "/url", message: `HTTP ${response.status}` }],
    });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new AcpError("InvalidParams", `the agent card at ${cardUrl} is not JSON`, {
      problems: [{ path: "/url", message: "not JSON" }],
    });
  }
  // An A2A 0.3 card (`url`, `preferredTransport`) is read as the 1.0 card it stands for.
  const card = isLegacyAgentCard(raw)
    ? parseAgentCard(AgentCard.toJSON(parseLegacyAgentCard(checkLegacyCard(raw, cardUrl.href))), cardUrl.href)
    : parseAgentCard(raw, cardUrl.href);
  return { card, raw: raw as Record<string, unknown>, url: cardUrl.href };
}

/** The 0.3 members the translation relies on, named as the 0.3 card names them. */
const LegacyCard = z.looseObject({
  name: z.string().min(1, "must not be empty"),
  url: z.url("must be an absolute URL"),
  protocolVersion: z.string().regex(/^0\.3(\.|$)/, "must be an A2A 0.3 version"),
  preferredTransport: z.string().optional(),
});

function checkLegacyCard(raw: unknown, source: string): unknown {
  const parsed = LegacyCard.safeParse(raw);
  if (parsed.success) return raw;
  const problems = problemsOf(parsed.error, "/card");
  throw new AcpError(
    "InvalidParams",
    `the agent card at ${source} is not a valid A2A 0.3 card: ${problems[0]?.path} ${problems[0]?.message}`,
    { problems },
  );
}

export function parseAgentCard(raw: unknown, source: string): A2AAgentCard {
  const parsed = A2AAgentCard.safeParse(raw);
  if (!parsed.success) {
    const problems = problemsOf(parsed.error, "/card");
    const first = problems[0];
    throw new AcpError(
      "InvalidParams",
      `the agent card at ${source} is not a valid A2A ${A2A_VERSION} card: ${first?.path} ${first?.message}`,
      { problems },
    );
  }
  return parsed.data;
}

/** The innermost cause of a fetch failure (ECONNREFUSED, timeout…), for messages. */
export function causeOf(err: unknown): string {
  let current: unknown = err;
  while ((current as { cause?: unknown })?.cause) current = (current as { cause: unknown }).cause;
  const e = current as { code?: string; message?: string; name?: string };
  if (e?.name === "TimeoutError") return "timed out";
  return e?.code ?? e?.message ?? String(current);
}
