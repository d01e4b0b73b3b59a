import { z } from "zod";
import { AgentRef } from "./address.js";

/**
 * The ACP wire types. These zod schemas are the single source of truth: every TypeScript type of a
 * message is inferred from them, and docs/protocol.md describes exactly these shapes.
 */

/** Agent ids name NATS subjects (`agent.<id>.inbox`), so they exclude `.`, `*`, `>` and whitespace. */
export const AgentId = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/,
    "must be 1-128 characters of A-Z a-z 0-9 _ - starting alphanumeric",
  );

export const PrincipalId = z
  .string()
  .min(1, "must not be empty")
  .max(256, "must be at most 256 characters")
  .regex(/^[^\s\p{Cc}]+$/u, "must not contain whitespace or control characters");

/** Unique per message (notifications included); the dedup key and NATS `Nats-Msg-Id`. */
export const MessageId = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$/,
    "must be 8-128 characters of A-Z a-z 0-9 . _ : - (a UUID is ideal)",
  );

const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

/**
 * The `message-type` header: what a message is on the wire (an error response is a `response`). A
 * broker stores it as a message's `kind`; `MessageType.options` lists the four values.
 */
export const MessageType = z.enum(["request", "response", "notification", "handoff"]);

/** The longest `summary` header: a summary is 1–2 sentences; the transparency channel shows 240. */
export const MAX_SUMMARY_HEADER_CHARS = 1000;

/**
 * The six mandatory identity headers of the ACP core protocol, plus ACP's routing headers (see
 * docs/protocol.md).
 */
export const Headers = z.object({
  /** The sender: its agent id, or its address (`agent@domain`) in a message to another domain. */
  "agent-id": AgentRef,
  "principal-id": PrincipalId,
  timestamp: z.iso.datetime({
    offset: true,
    message: "must be an ISO 8601 date-time with a zone, e.g. 2026-02-14T12:00:00Z",
  }),
  "message-type": MessageType,
  "trust-layer-version": z.string().regex(SEMVER, "must be a semantic version such as 1.0.0"),
  "skill-layers-loaded": z.array(
    z.int({ error: "must be a non-negative integer" }).nonnegative("must be a non-negative integer"),
    { error: "must be an array of skill layer numbers, e.g. [0, 1]" },
  ),
  /** Required on every signed envelope; optional only so the core protocol's unsigned examples stay valid. */
  "message-id": MessageId.optional(),
  "recipient-id": AgentRef.optional(),
  /**
   * The sender's own human-readable summary of the message, for the principals' transparency
   * channel (the ACP core protocol's summaries); signed with everything else. Optional.
   */
  summary: z
    .string({ error: "must be a string" })
    .min(1, "must not be empty")
    .max(MAX_SUMMARY_HEADER_CHARS, `must be at most ${MAX_SUMMARY_HEADER_CHARS} characters`)
    .optional(),
});

/** The headers every relayed (signed) envelope must carry: routing and dedup are signed with it. */
export const EnvelopeHeaders = Headers.extend({
  "message-id": MessageId,
  "recipient-id": AgentRef,
});

export const JsonRpcId = z.union([z.string().min(1, "must not be empty"), z.int()], {
  error: "must be a non-empty string or an integer",
});

/** Detached compact JWS: BASE64URL(protected) "." "" "." BASE64URL(signature) (RFC 7515 appendix F). */
export const DetachedJws = z
  .string()
  .regex(/^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$/, "must be a detached compact JWS (header..signature)");

const Body = z.record(z.string(), z.unknown());

/** An end-to-end encrypted body: a compact JWE (RFC 7516) and nothing else. */
export const EncryptedBody = z.strictObject({
  jwe: z.string().regex(/^[A-Za-z0-9_-]*(\.[A-Za-z0-9_-]*){4}$/, "must be a compact JWE"),
});

export const AnnounceBody = z.object({
  capabilities: z.array(z.string().min(1)),
  purpose: z.string().min(1, "must say what the agent wants"),
  /** Set on the announce sent in answer to the peer's: a reply is never answered with an announce. */
  reply: z.boolean().optional(),
});

const ToolDescriptor = z.union([
  z.string().min(1),
  z.object({ name: z.string().min(1), description: z.string().optional() }),
]);

export const CapabilitiesBody = z.object({
  tools: z.array(ToolDescriptor),
  domains: z.array(z.string().min(1)),
  limits: z.array(z.string().min(1)),
  requests: z.array(z.string().min(1)),
});

const WorkDescription = z.union([
  z.string().min(1, "must not be empty"),
  z.array(z.unknown()).min(1, "must not be empty"),
  z.record(z.string(), z.unknown()),
]);

export const HandoffBody = z.object({
  completed: WorkDescription,
  remaining: WorkDescription,
  context: z.record(z.string(), z.unknown()),
});

const method = (name: string) => z.literal(name);
const envelopeBase = {
  jsonrpc: z.literal("2.0"),
  signature: DetachedJws.optional(),
};

function paramsOf<B extends z.ZodType>(body: B) {
  return z.strictObject({ headers: Headers, body });
}

export const RequestMessage = z.object({
  ...envelopeBase,
  method: method("agent.request"),
  params: paramsOf(Body),
  id: JsonRpcId,
});

export const NotificationMessage = z.object({
  ...envelopeBase,
  method: method("agent.notification"),
  params: paramsOf(Body),
});

export const HandoffMessage = z.object({
  ...envelopeBase,
  method: method("agent.handoff"),
  params: paramsOf(z.union([HandoffBody, EncryptedBody])),
  id: JsonRpcId,
});

/** The two shapes a handoff takes; validation picks one by the body's `jwe` member, for precise errors. */
export const PlainHandoffMessage = HandoffMessage.extend({ params: paramsOf(HandoffBody) });
export const EncryptedHandoffMessage = HandoffMessage.extend({ params: paramsOf(EncryptedBody) });

export const AnnounceMessage = z.object({
  ...envelopeBase,
  method: method("agent.announce"),
  params: paramsOf(AnnounceBody),
});

export const CapabilitiesMessage = z.object({
  ...envelopeBase,
  method: method("agent.capabilities"),
  params: paramsOf(CapabilitiesBody),
});

/** Extension methods (`agent.<name>`, e.g. `agent.command`) follow request or notification rules. */
export const ExtensionMethod = z
  .string()
  .regex(/^agent\.[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$/, "must be agent.<name>");
export const ExtensionRequestMessage = z.object({
  ...envelopeBase,
  method: ExtensionMethod,
  params: paramsOf(Body),
  id: JsonRpcId,
});
export const ExtensionNotificationMessage = z.object({
  ...envelopeBase,
  method: ExtensionMethod,
  params: paramsOf(Body),
});

export const ResponseMessage = z.object({
  ...envelopeBase,
  result: z.strictObject({ headers: Headers, body: Body }),
  id: JsonRpcId,
});

export const ErrorObject = z.object({
  code: z.int(),
  message: z.string(),
  data: z.unknown().optional(),
});

/**
 * A JSON-RPC error response. When an agent (not a gateway) answers with an error, it signs it and
 * carries its identity headers in `error.data.headers`.
 */
export const ErrorResponseMessage = z.object({
  ...envelopeBase,
  error: ErrorObject,
  id: z.union([JsonRpcId, z.null()]),
});

export type AgentId = z.infer<typeof AgentId>;
export type Headers = z.infer<typeof Headers>;
export type EnvelopeHeaders = z.infer<typeof EnvelopeHeaders>;
export type JsonRpcId = z.infer<typeof JsonRpcId>;
export type MessageType = z.infer<typeof MessageType>;
export type EncryptedBody = z.infer<typeof EncryptedBody>;
export type AnnounceBody = z.infer<typeof AnnounceBody>;
export type CapabilitiesBody = z.infer<typeof CapabilitiesBody>;
export type HandoffBody = z.infer<typeof HandoffBody>;
export type RequestMessage = z.infer<typeof RequestMessage>;
export type NotificationMessage = z.infer<typeof NotificationMessage>;
export type HandoffMessage = z.infer<typeof HandoffMessage>;
export type AnnounceMessage = z.infer<typeof AnnounceMessage>;
export type CapabilitiesMessage = z.infer<typeof CapabilitiesMessage>;
export type ResponseMessage = z.infer<typeof ResponseMessage>;
export type ErrorResponseMessage = z.infer<typeof ErrorResponseMessage>;
export type ErrorObject = z.infer<typeof ErrorObject>;

/** A message that carries `params` (sent by an agent on its own initiative). */
export type MethodMessage =
  | z.infer<typeof ExtensionRequestMessage>
  | z.infer<typeof ExtensionNotificationMessage>;
export type AcpMessage = MethodMessage | ResponseMessage | ErrorResponseMessage;

/**
 * What `messageKind()` reads from a message's JSON-RPC shape and method: its `MessageType`, except
 * that an error response is `error`, apart from a response with a result.
 */
export type MessageKind = "request" | "notification" | "handoff" | "response" | "error";

/** Methods that are notifications by definition: they MUST NOT carry an id. */
export const NOTIFICATION_METHODS: ReadonlySet<string> = new Set([
  "agent.notification",
  "agent.announce",
  "agent.capabilities",
]);
/** Methods that are requests by definition: they MUST carry an id and expect a response. */
export const REQUEST_METHODS: ReadonlySet<string> = new Set(["agent.request", "agent.handoff"]);
