import { AcpError } from "../protocol/index.js";
import {
  AgentList,
  type AgentView,
  AgentView as AgentViewSchema,
  PresenceView,
  type RegisterAgentRequest,
  RegisterAgentResponse,
  RevokedAgent,
} from "../wire/agents.js";
import { API_PREFIX, type HandshakeProofView, type PresenceUpdate, SubmitResponse } from "../wire/api.js";
import {
  readingDeprecatedNames,
  type WithDeprecatedNames,
  withCurrentNames,
} from "../wire/deprecated-names.js";
import {
  type MessageListItem,
  MessagePage as MessagePageSchema,
  MessageStatusView,
  MessageWithEnvelope,
} from "../wire/messages.js";
import { requestGatewayJson } from "./request.js";

export interface GatewayClientOptions {
  /** Base URL of the gateway, e.g. `http://127.0.0.1:8700`. */
  gateway: string;
  /** The agent's API key (X-API-Key). */
  apiKey?: string;
  /** The gateway's admin token, for registering and revoking agents. */
  adminToken?: string;
}

/**
 * Filters of GET /api/v1/messages, named as the SDK names a message's sender, recipient and kind
 * everywhere (`from`, `to`, `kind`); sent as the REST API's `from_agent_id`, `to_agent_id`, `type`
 * (docs/protocol.md, "One name per layer").
 */
export interface ListMessagesQuery {
  from?: string;
  to?: string;
  kind?: MessageListItem["kind"];
  /** @deprecated Use `from`. */
  fromAgentId?: string;
  /** @deprecated Use `to`. */
  toAgentId?: string;
  /** @deprecated Use `kind`. */
  type?: string;
  status?: SubmitResponse["status"];
  cursor?: string;
  limit?: number;
}

/**
 * A page of GET /api/v1/messages, its items in the snake_case the API documents; each also carries
 * the deprecated camelCase names (`queuedAt`, `retryCount`, `nextCursor`, …) for now.
 */
export type MessagePage = WithDeprecatedNames<MessagePageSchema>;

type Auth = "agent" | "admin" | "admin-or-agent";

/**
 * The gateway's REST API (docs/gateway.md), typed. Every non-2xx answer becomes the AcpError the
 * gateway sent (its JSON-RPC error object), with the HTTP status in `data.httpStatus`.
 */
export class GatewayClient {
  readonly baseUrl: string;

  constructor(private readonly options: GatewayClientOptions) {
    this.baseUrl = normaliseGatewayUrl(options.gateway);
  }

  /**
   * Registers an agent's public keys (admin token) and returns its API key, shown only this once.
   * Rejects with the gateway's AcpError, e.g. when the agent id is taken by another key.
   */
  registerAgent(request: RegisterAgentRequest): Promise<WithDeprecatedNames<RegisterAgentResponse>> {
    return this.call("POST", "/agents", {
      auth: "admin",
      body: withCurrentNames(request),
      schema: readingDeprecatedNames(RegisterAgentResponse),
    });
  }

  /** Every registered agent with its keys and presence (admin token or an agent's key). */
  async listAgents(): Promise<WithDeprecatedNames<AgentView>[]> {
    const page = await this.call("GET", "/agents", {
      auth: "admin-or-agent",
      schema: readingDeprecatedNames(AgentList),
    });
    return page.agents;
  }

  /** One agent's public record; rejects with AgentNotFound when the gateway has no such agent. */
  getAgent(agentId: string): Promise<WithDeprecatedNames<AgentView>> {
    return this.call("GET", `/agents/${encodeURIComponent(agentId)}`, {
      auth: "admin-or-agent",
      schema: readingDeprecatedNames(AgentViewSchema),
    });
  }

  /** A new API key for the agent; the old one stops working. Admin token, or the agent's own key. */
  rotateApiKey(agentId: string): Promise<WithDeprecatedNames<RegisterAgentResponse>> {
    return this.call("POST", `/agents/${encodeURIComponent(agentId)}/rotate`, {
      auth: "admin-or-agent",
      schema: readingDeprecatedNames(RegisterAgentResponse),
    });
  }

  /** Revokes an agent (admin token): its key stops working and it can no longer send or receive. */
  revokeAgent(agentId: string): Promise<WithDeprecatedNames<RevokedAgent>> {
    return this.call("POST", `/agents/${encodeURIComponent(agentId)}/revoke`, {
      auth: "admin",
      schema: readingDeprecatedNames(RevokedAgent),
    });
  }

  /**
   * Sets the agent's own presence (its API key), sent in the API's snake_case; `AcpAgent.setPresence`
   * validates and calls this. Answers the presence the gateway now shows.
   */
  updatePresence(agentId: string, update: PresenceUpdate): Promise<WithDeprecatedNames<PresenceView>> {
    return this.call("PUT", `/agents/${encodeURIComponent(agentId)}/presence`, {
      auth: "agent",
      body: withCurrentNames(update),
      schema: readingDeprecatedNames(PresenceView),
    });
  }

  /** POST /api/v1/messages: submits a signed envelope (the SDK prefers its WebSocket for this). */
  submit(envelope: object): Promise<SubmitResponse> {
    return this.call("POST", "/messages", { auth: "agent", body: envelope, schema: SubmitResponse });
  }

  /**
   * A page of the messages the caller may see (an agent: its own; the admin: all), filtered by
   * `query`; pass the page's cursor back for the next one.
   */
  listMessages(query: ListMessagesQuery = {}): Promise<MessagePage> {
    const params = new URLSearchParams();
    const values: [string, string | number | undefined][] = [
      ["from_agent_id", query.from ?? query.fromAgentId],
      ["to_agent_id", query.to ?? query.toAgentId],
      ["type", query.kind ?? query.type],
      ["status", query.status],
      ["cursor", query.cursor],
      ["limit", query.limit],
    ];
    for (const [name, value] of values) {
      if (value !== undefined) params.set(name, String(value));
    }
    const search = params.size > 0 ? `?${params}` : "";
    return this.call("GET", `/messages${search}`, {
      auth: "agent",
      schema: readingDeprecatedNames(MessagePageSchema),
    });
  }

  /**
   * The message record with its `envelope` (participants only). Message ids are per sender: `from`
   * names the sender of a message this agent received; without it, the id is one of its own.
   */
  getMessage(id: string, from?: string): Promise<WithDeprecatedNames<MessageWithEnvelope>> {
    return this.call("GET", messagePath(id, "", from), {
      auth: "agent",
      schema: readingDeprecatedNames(MessageWithEnvelope),
    });
  }

  /** The delivery status; `from` as for `getMessage`. */
  messageStatus(id: string, from?: string): Promise<MessageStatusView> {
    return this.call("GET", messagePath(id, "/status", from), { auth: "agent", schema: MessageStatusView });
  }

  /** Acknowledges a message this agent received from `from`. */
  acknowledge(id: string, from: string): Promise<unknown> {
    return this.call("POST", messagePath(id, "/acknowledge", from), { auth: "agent" });
  }

  private credential(auth: Auth): Record<string, string> {
    const { apiKey, adminToken } = this.options;
    if (auth === "admin" || (auth === "admin-or-agent" && apiKey === undefined)) {
      if (adminToken === undefined) {
        throw new AcpError("Unauthorized", "this call needs the gateway's admin token (ACP_ADMIN_TOKEN)");
      }
      return { authorization: `Bearer ${adminToken}` };
    }
    if (apiKey === undefined) {
      throw new AcpError("Unauthorized", "this call needs the agent's API key (ACP_API_KEY)");
    }
    return { "x-api-key": apiKey };
  }

  /** The peer's side of its latest handshake with this agent, as the gateway relayed it; undefined when it has none. */
  async handshakeProof(peer: string): Promise<HandshakeProofView | undefined> {
    try {
      return await this.call<HandshakeProofView>("GET", `/handshakes/${encodeURIComponent(peer)}`, {
        auth: "agent",
      });
    } catch (err) {
      if (err instanceof AcpError && err.kind === "NotFound") return undefined;
      throw err;
    }
  }

  private async call<T>(
    method: string,
    path: string,
    options: { auth: Auth; body?: unknown; schema?: { parse(value: unknown): T } },
  ): Promise<T> {
    const parsed = await requestGatewayJson(this.baseUrl, method, `${API_PREFIX}${path}`, {
      headers: this.credential(options.auth),
      ...(options.body !== undefined ? { body: options.body } : {}),
    });
    return options.schema ? options.schema.parse(parsed) : (parsed as T);
  }
}

/** `http://host:port` without a trailing slash; refuses anything that is not an http(s) URL. */
export function normaliseGatewayUrl(gateway: string): string {
  let url: URL;
  try {
    url = new URL(gateway);
  } catch {
    throw new AcpError("InvalidParams", `gateway URL ${JSON.stringify(gateway)} is not a URL`, {
      problems: [{ path: "/gateway", message: "must be an http:// or https:// URL" }],
    });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new AcpError("InvalidParams", `gateway URL ${gateway} must use http:// or https://`, {
      problems: [{ path: "/gateway", message: "must be an http:// or https:// URL" }],
    });
  }
  return url.origin + url.pathname.replace(/\/+$/, "");
}

/** The WebSocket URL for a gateway base URL (http → ws, https → wss). */
export function websocketUrl(baseUrl: string, path: string): string {
  return baseUrl.replace(/^http/, "ws") + path;
}

function messagePath(id: string, action: string, from: string | undefined): string {
  const query = from === undefined ? "" : `?from=${encodeURIComponent(from)}`;
  return `/messages/${encodeURIComponent(id)}${action}${query}`;
}
