import type { AcpError } from "./errors.js";
import { newMessageId } from "./message-id.js";
import type {
  AnnounceBody,
  CapabilitiesBody,
  EnvelopeHeaders,
  ErrorResponseMessage,
  HandoffBody,
  JsonRpcId,
  MessageType,
  MethodMessage,
  ResponseMessage,
} from "./schemas.js";

/** The protocol version this implementation speaks (the `trust-layer-version` header). */
export const TRUST_LAYER_VERSION = "1.0.0";

/** Who is sending: the identity that fills the six mandatory headers. */
export interface SenderIdentity {
  agentId: string;
  principalId: string;
  /** skill-layers-loaded; declare them, agents declaring none are declined by default. */
  layers: number[];
  trustLayerVersion?: string;
}

export interface BuildOptions {
  now?: Date;
  messageId?: string;
}

export function buildHeaders(
  sender: SenderIdentity,
  type: MessageType,
  recipientId: string,
  options: BuildOptions = {},
): EnvelopeHeaders {
  return {
    "agent-id": sender.agentId,
    "principal-id": sender.principalId,
    timestamp: (options.now ?? new Date()).toISOString(),
    "message-type": type,
    "trust-layer-version": sender.trustLayerVersion ?? TRUST_LAYER_VERSION,
    "skill-layers-loaded": [...sender.layers],
    "message-id": options.messageId ?? newMessageId(),
    "recipient-id": recipientId,
  };
}

/** A request (`agent.request`, or an extension method such as `agent.command`); expects a response. */
export function buildRequest(
  sender: SenderIdentity,
  to: string,
  body: Record<string, unknown>,
  options: BuildOptions & { method?: string; id?: JsonRpcId } = {},
): MethodMessage & { id: JsonRpcId } {
  const headers = buildHeaders(sender, "request", to, options);
  return {
    jsonrpc: "2.0",
    method: options.method ?? "agent.request",
    params: { headers, body },
    id: options.id ?? headers["message-id"],
  };
}

/** A one-way notification: never carries an id (JSON-RPC 2.0); its message-id header is its identity. */
export function buildNotification(
  sender: SenderIdentity,
  to: string,
  body: Record<string, unknown>,
  options: BuildOptions & { method?: string } = {},
): MethodMessage {
  return {
    jsonrpc: "2.0",
    method: options.method ?? "agent.notification",
    params: { headers: buildHeaders(sender, "notification", to, options), body },
  };
}

/** Step 1 of the handshake: the `agent.announce` notification (who I am, what I can do). */
export function buildAnnounce(
  sender: SenderIdentity,
  to: string,
  body: AnnounceBody,
  options: BuildOptions = {},
): MethodMessage {
  return buildNotification(sender, to, body, { ...options, method: "agent.announce" });
}

/** Step 3 of the handshake: the `agent.capabilities` notification (tools, domains, limits). */
export function buildCapabilities(
  sender: SenderIdentity,
  to: string,
  body: CapabilitiesBody,
  options: BuildOptions = {},
): MethodMessage {
  return buildNotification(sender, to, body, { ...options, method: "agent.capabilities" });
}

/** Transfers a task: the body must say what is completed, what remains, and all context. */
export function buildHandoff(
  sender: SenderIdentity,
  to: string,
  body: HandoffBody | Record<string, unknown>,
  options: BuildOptions & { id?: JsonRpcId } = {},
): MethodMessage & { id: JsonRpcId } {
  const headers = buildHeaders(sender, "handoff", to, options);
  return {
    jsonrpc: "2.0",
    method: "agent.handoff",
    params: { headers, body },
    id: options.id ?? headers["message-id"],
  };
}

/** The response to `request` from `sender`: same JSON-RPC id, addressed back to the requester. */
export function buildResponse(
  sender: SenderIdentity,
  request: { id: JsonRpcId; params: { headers: { "agent-id": string } } },
  body: Record<string, unknown>,
  options: BuildOptions = {},
): ResponseMessage {
  return {
    jsonrpc: "2.0",
    result: { headers: buildHeaders(sender, "response", request.params.headers["agent-id"], options), body },
    id: request.id,
  };
}

/** An agent's signed error answer: identity headers ride in `error.data.headers`. */
export function buildErrorResponse(
  sender: SenderIdentity,
  request: { id: JsonRpcId; params: { headers: { "agent-id": string } } },
  error: AcpError | { code: number; message: string; data?: Record<string, unknown> },
  options: BuildOptions = {},
): ErrorResponseMessage {
  const headers = buildHeaders(sender, "response", request.params.headers["agent-id"], options);
  const data = "toJSON" in error ? error.data : (error.data ?? {});
  return {
    jsonrpc: "2.0",
    error: { code: error.code, message: error.message, data: { ...data, headers } },
    id: request.id,
  };
}
