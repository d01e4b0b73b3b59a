import { z } from "zod";
import { AgentId, Ed25519PublicJwk, PrincipalId, X25519PublicJwk } from "../protocol/index.js";

/**
 * The gateway's own wire contract (REST bodies and WebSocket frames), shared by the gateway and the
 * SDK so neither side declares it twice. ACP messages themselves are defined in src/protocol.
 * docs/gateway.md describes every endpoint and frame.
 */
export const API_PREFIX = "/api/v1";
export const WS_PATH = `${API_PREFIX}/ws`;
/** The dashboard's API (and the principal token management under it). */
export const DASHBOARD_API = `${API_PREFIX}/dashboard`;

/** A human principal as `GET /api/v1/dashboard/principals` lists it (its token's hash is never shown). */
export interface PrincipalView {
  principalId: string;
  createdAt: string;
  revokedAt?: string;
}

export const ProtocolVersion = z.string().regex(/^\d+\.\d+\.\d+$/, "must be a version such as 1.0.0");

/** POST /api/v1/agents (admin token): what an agent registers. */
export const RegisterAgentRequest = z.strictObject({
  agentId: AgentId,
  principalId: PrincipalId,
  signing: Ed25519PublicJwk,
  encryption: X25519PublicJwk.optional(),
  capabilities: z.array(z.string().min(1)).default([]),
  protocolVersions: z
    .array(ProtocolVersion)
    .min(1, "declare at least one protocol version")
    .default(["1.0.0"]),
});
export type RegisterAgentRequest = z.input<typeof RegisterAgentRequest>;

/** The API key is shown once, here; the gateway stores only its hash. */
export const RegisterAgentResponse = z.object({ agentId: AgentId, apiKey: z.string() });
export type RegisterAgentResponse = z.infer<typeof RegisterAgentResponse>;

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

/** GET /api/v1/agents[/:id]: the public view of a registered agent. */
export const AgentView = z.object({
  agentId: AgentId,
  principalId: PrincipalId,
  signing: Ed25519PublicJwk,
  encryption: X25519PublicJwk.optional(),
  capabilities: z.array(z.string()),
  protocolVersions: z.array(ProtocolVersion),
  createdAt: z.string(),
  revokedAt: z.string().optional(),
  presence: Presence,
});
export type AgentView = z.infer<typeof AgentView>;

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

/** Frames an agent sends on its WebSocket. */
export const ClientFrame = z.discriminatedUnion("type", [
  /** Only needed when the upgrade request carried no API key header (browsers cannot set one). */
  z.strictObject({ type: z.literal("auth"), apiKey: z.string().min(1) }),
  /** Submit a signed envelope, as POST /messages does; answered by `submitted` or `error` with the same ref. */
  z.strictObject({
    type: z.literal("submit"),
    ref: z.union([z.string(), z.number()]),
    envelope: z.record(z.string(), z.unknown()),
  }),
  z.strictObject({ type: z.literal("acknowledge"), id: z.string().min(1) }),
  z.strictObject({ type: z.literal("reject"), id: z.string().min(1), reason: z.string().min(1).max(1000) }),
  z.strictObject({ type: z.literal("presence"), presence: PresenceUpdate }),
  z.strictObject({ type: z.literal("heartbeat") }),
]);
export type ClientFrame = z.infer<typeof ClientFrame>;

/**
 * Frames the gateway sends. `new_message` carries the signed envelope exactly as submitted; the
 * receiver verifies it itself (end to end) before acting on it, then acknowledges it.
 */
export type ServerFrame =
  | { type: "ready"; agentId: string; gateway: string; heartbeatMs: number }
  | {
      type: "new_message";
      id: string;
      from: string;
      kind: string;
      method: string;
      attempt: number;
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
      id?: string;
      error: { code: number; message: string; data?: unknown };
    }
  | { type: "presence"; agentId: string; presence: Presence };
