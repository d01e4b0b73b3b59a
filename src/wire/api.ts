import { z } from "zod";
import {
  AgentId,
  DEFAULT_PRIORITY,
  DetachedJws,
  Ed25519PublicJwk,
  PRIORITIES,
  type Priority,
  parsePriority,
} from "../protocol/index.js";
import type { VersionDeprecation } from "./versions.js";

/**
 * The gateway's own wire contract (REST bodies and WebSocket frames), shared by the gateway and the
 * SDK so neither side declares it twice. ACP messages themselves are defined in src/protocol.
 * docs/gateway.md describes every endpoint and frame.
 */
export const API_PREFIX = "/api/v1";
export const WS_PATH = `${API_PREFIX}/ws`;
/** Phoenix Channels (the messaging platform's real-time delivery): what `new Socket("/socket")` connects to. */
export const PHOENIX_SOCKET_PATH = "/socket/websocket";
/** The dashboard's API (and the principal token management under it). */
export const DASHBOARD_API = `${API_PREFIX}/dashboard`;

/** A human principal as `GET /api/v1/dashboard/principals` lists it (its token's hash is never shown). */
export interface PrincipalView {
  principalId: string;
  createdAt: string;
  revokedAt?: string;
}

/** One earlier signing key of an agent, and the key that replaced it. */
export const KeyHistoryEntry = z.object({
  kid: z.string().min(1).max(300),
  x: Ed25519PublicJwk.shape.x,
  /** When it became the agent's key. */
  from: z.iso.datetime({ offset: true }),
  /** When it was replaced. */
  until: z.iso.datetime({ offset: true }),
  /** The key id that replaced it. */
  successor: z.string().min(1).max(300),
  /** A detached JWS by this key over `{agentId, successor, x}` of the new key: the handover. */
  handover: DetachedJws.optional(),
});
export type KeyHistoryEntry = z.infer<typeof KeyHistoryEntry>;

/**
 * POST /api/v1/agents/:id/keys: the agent's new signing key, and the handover by its current key
 * (a detached JWS over `{agentId, successor, x}` of the new key; `signHandover` makes it).
 */
export const RotateSigningKeyRequest = z.strictObject({
  signing: Ed25519PublicJwk,
  handover: DetachedJws,
});

export const ProtocolVersion = z.string().regex(/^\d+\.\d+\.\d+$/, "must be a version such as 1.0.0");

export const PresenceState = z.enum(["online", "offline", "busy", "away"]);
export type PresenceState = z.infer<typeof PresenceState>;

export const TaskProgress = z.object({
  id: z.string().min(1),
  title: z.string().optional(),
  progress: z.number().min(0).max(100).optional(),
});

export const Presence = z.object({
  state: PresenceState,
  load: z.number().min(0).max(100),
  metrics: z.object({ responseTimeMs: z.number().nonnegative(), errorRate: z.number().min(0).max(1) }),
  activeTasks: z.number().int().nonnegative(),
  tasks: z.array(TaskProgress).default([]),
  lastSeen: z.string(),
  /** Open WebSocket connections, across gateways. */
  connections: z.number().int().nonnegative(),
});
export type Presence = z.infer<typeof Presence>;

/**
 * GET /api/v1/handshakes/:peer: the peer's side of its latest handshake with the caller, as relayed
 * (its signed `agent.announce` and `agent.capabilities`, addressed to the caller). The caller
 * verifies both against the peer's registered key before it trusts them.
 */
export interface HandshakeProofView {
  peer: string;
  announce: Record<string, unknown>;
  capabilities: Record<string, unknown>;
}

/** POST /api/v1/messages → 202 */
export const SubmitResponse = z.object({
  id: z.string(),
  status: z.enum(["queued", "delivered", "acknowledged", "failed", "expired"]),
  duplicate: z.boolean(),
});
export type SubmitResponse = z.infer<typeof SubmitResponse>;

/** Presence an agent reports about itself (WebSocket `presence` frame or PUT /agents/:id/presence). */
export const PresenceUpdate = z.strictObject({
  state: z.enum(["online", "busy", "away"]).optional(),
  load: z.number().min(0).max(100).optional(),
  metrics: z
    .object({ responseTimeMs: z.number().nonnegative(), errorRate: z.number().min(0).max(1) })
    .optional(),
  activeTasks: z.number().int().nonnegative().optional(),
  tasks: z.array(TaskProgress).optional(),
});
export type PresenceUpdate = z.infer<typeof PresenceUpdate>;

/**
 * Query parameter of the WebSocket upgrade (`/api/v1/ws?maxAckPending=16`): the socket's window,
 * as an AMQP prefetch count or JetStream's `max_ack_pending`: the gateway sends it at most this many
 * deliveries it has not acknowledged or rejected (or whose ack wait has not ended). From 1 to the
 * gateway's per-agent limit (256); without it, that limit. The `flow` frame changes it later.
 */
export const MAX_ACK_PENDING_PARAM = "maxAckPending";

/**
 * A message's priority as its sender gives it (a submit's `priority`, `?priority=` of
 * POST /messages, the messaging platform's body): one of PRIORITIES, or the platform's "normal"
 * (medium). It ranks the message in the recipient's queue; it is not part of the signed envelope.
 */
export const PriorityInput = z
  .enum([...PRIORITIES, "normal"], { error: `must be one of ${[...PRIORITIES, "normal"].join(", ")}` })
  .transform((given): Priority => parsePriority(given) ?? DEFAULT_PRIORITY);

/**
 * Query parameter of the WebSocket upgrade: `all` (default) takes a share of the agent's queue,
 * with the agent's other receiving sockets (a work queue); `replies` takes only what is routed to
 * this socket: the answers to the requests it sent and the handshake replies to its announces
 * (a one-shot command beside the agent's running consumer).
 */
export const CONSUME_PARAM = "consume";

/**
 * The sender a `new_message` frame names: an agent id, or the broker's name for an agent of another
 * domain (`_at_` and 40 hex digits, docs/federation.md), which its recipient settles like any other.
 */
const DeliveredFrom = z.union([
  AgentId,
  z
    .string()
    .regex(/^_at_[0-9a-f]{40}$/, "an agent id, or _at_ and 40 hex digits for an agent of another domain"),
]);

/** Frames an agent sends on its WebSocket. */
export const ClientFrame = z.discriminatedUnion("type", [
  /** Only needed when the upgrade request carried no API key header (browsers cannot set one). */
  z.strictObject({ type: z.literal("auth"), apiKey: z.string().min(1) }),
  /** Submit a signed envelope, as POST /messages does; answered by `submitted` or `error` with the same ref. */
  z.strictObject({
    type: z.literal("submit"),
    ref: z.union([z.string(), z.number()]),
    envelope: z.record(z.string(), z.unknown()),
    priority: PriorityInput.optional(),
  }),
  /**
   * Settle a delivery: `id` and `from` as the `new_message` frame gave them (message ids are per
   * sender, so the sender is part of the name).
   */
  z.strictObject({ type: z.literal("acknowledge"), id: z.string().min(1), from: DeliveredFrom }),
  z.strictObject({
    type: z.literal("reject"),
    id: z.string().min(1),
    from: DeliveredFrom,
    reason: z.string().min(1).max(1000),
  }),
  /**
   * Still working on a delivery it holds: its ack wait starts again (JetStream's in-progress
   * acknowledgement). Send it for each delivery held, every third of `ready.ackWaitMs`; silence on
   * success, an `error` frame with the id if the message is no longer out for delivery.
   */
  z.strictObject({ type: z.literal("working"), id: z.string().min(1), from: DeliveredFrom }),
  /** Changes the socket's window (`maxAckPending`, see MAX_ACK_PENDING_PARAM). */
  z.strictObject({ type: z.literal("flow"), maxAckPending: z.number().int().min(1) }),
  z.strictObject({ type: z.literal("presence"), presence: PresenceUpdate }),
  z.strictObject({ type: z.literal("heartbeat") }),
]);
export type ClientFrame = z.infer<typeof ClientFrame>;

/**
 * Frames the gateway sends. `new_message` carries the signed envelope exactly as submitted; the
 * receiver verifies it itself (end to end) before acting on it, then acknowledges it.
 */
export type ServerFrame =
  | {
      type: "ready";
      agentId: string;
      gateway: string;
      heartbeatMs: number;
      /** A first delivery's ack wait (later attempts wait longer): send `working` well within it. */
      ackWaitMs: number;
      /** The socket's window in effect (see MAX_ACK_PENDING_PARAM). */
      maxAckPending: number;
      /** The agent's newest protocol version is deprecated: when, and when it will be refused. */
      deprecation?: VersionDeprecation;
    }
  | {
      type: "new_message";
      id: string;
      from: string;
      kind: string;
      method: string;
      attempt: number;
      /** How the sender ranked it in this agent's queue. */
      priority: Priority;
      envelope: Record<string, unknown>;
    }
  | {
      type: "submitted";
      ref: string | number;
      id: string;
      status: SubmitResponse["status"];
      duplicate: boolean;
    }
  | {
      type: "error";
      ref?: string | number;
      /** The message an `acknowledge` or `reject` named, when it failed. */
      id?: string;
      from?: string;
      error: { code: number; message: string; data?: unknown };
    }
  | { type: "presence"; agentId: string; presence: Presence };
