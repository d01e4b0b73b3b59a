import { z } from "zod";
import {
  AgentAddress,
  AgentId,
  DetachedJws,
  Ed25519PublicJwk,
  FederationDomain,
  MessageId,
  PrincipalId,
  X25519PublicJwk,
} from "../protocol/index.js";
import { KeyHistoryEntry, ProtocolVersion } from "./api.js";
import type { RestAnswer } from "./deprecated-names.js";

/**
 * The federation's wire contract (docs/federation.md): what gateways publish and send each other,
 * and the admin API that manages peers. Shared by the federation extension, the CLI and the
 * dashboard.
 */

/** Where gateways talk to each other, on the federation listener. */
export const FEDERATION_PREFIX = "/federation/v1";
export const WELL_KNOWN_PATH = "/.well-known/acp";
/** The admin API (main listener, admin token). */
export const FEDERATION_API = "/api/v1/federation";

/** Headers of every request between gateways: who sends it, to whom, when, and its signature. */
export const PeerHeader = {
  Origin: "acp-origin",
  Destination: "acp-destination",
  Date: "acp-date",
  Signature: "acp-signature",
} as const;

const Iso = z.iso.datetime({ offset: true });

/** A gateway's federation signing key: kid `<domain>#<thumbprint>`. */
export const GatewayKey = Ed25519PublicJwk.extend({ kid: z.string().min(1).max(200) });
export type GatewayKey = z.infer<typeof GatewayKey>;

/** GET /.well-known/acp: the domain, its gateways' keys, its federation endpoint; signed by one key. */
export const FederationDocument = z.object({
  domain: FederationDomain,
  endpoint: z.url().max(2048),
  keys: z.array(GatewayKey).min(1).max(16),
  versions: z.array(ProtocolVersion).min(1).max(32),
  signature: DetachedJws,
});
export type FederationDocument = z.infer<typeof FederationDocument>;

/** GET /federation/v1/agents/:agentId: one agent of the answering gateway, signed by it. */
export const DirectoryRecord = z.object({
  address: AgentAddress,
  /** The principal, qualified with the domain: what the agent's messages to other domains say. */
  principalId: PrincipalId,
  signing: Ed25519PublicJwk,
  encryption: X25519PublicJwk.optional(),
  protocolVersions: z.array(ProtocolVersion).min(1).max(32),
  keyHistory: z.array(KeyHistoryEntry).max(64),
  revokedAt: Iso.optional(),
  issuedAt: Iso,
  signature: DetachedJws,
});
export type DirectoryRecord = z.infer<typeof DirectoryRecord>;

/**
 * POST /federation/v1/transfers: messages of the sending gateway's agents, each its signed envelope
 * as the text the agent submitted (it travels unchanged, byte for byte).
 */
export const MAX_TRANSFER_MESSAGES = 100;
/** The largest transfer request body. */
export const MAX_TRANSFER_BYTES = 8 * 1024 * 1024;
export const TransferRequest = z.strictObject({
  messages: z.array(z.string().min(2)).min(1).max(MAX_TRANSFER_MESSAGES),
});
export type TransferRequest = z.infer<typeof TransferRequest>;

/** The answer per message, in the request's order. */
export const TransferOutcome = z.object({
  id: z.string().max(200).nullable(),
  outcome: z.enum(["accepted", "duplicate", "refused"]),
  error: z.object({ code: z.int(), message: z.string().max(2000), data: z.unknown().optional() }).optional(),
});
export const TransferResponse = z.object({ results: z.array(TransferOutcome).max(MAX_TRANSFER_MESSAGES) });
export type TransferOutcome = z.infer<typeof TransferOutcome>;
export type TransferResponse = z.infer<typeof TransferResponse>;

/**
 * POST /federation/v1/status: the status of messages the asking gateway delivered here, each named
 * by its sender's address and its id (ids are per sender).
 */
export const MAX_STATUS_IDS = 500;
const SentMessage = z.strictObject({ from: AgentAddress, id: MessageId });
export const StatusRequest = z.strictObject({ messages: z.array(SentMessage).min(1).max(MAX_STATUS_IDS) });
export const DeliveryStatus = z.object({
  from: AgentAddress,
  id: MessageId,
  status: z.enum(["queued", "delivered", "acknowledged", "failed", "expired", "unknown"]),
  deliveredAt: Iso.optional(),
  acknowledgedAt: Iso.optional(),
  failedAt: Iso.optional(),
  expiredAt: Iso.optional(),
  retryCount: z.int().nonnegative().optional(),
  deadLetter: z.object({ reason: z.string().max(100), detail: z.string().max(2000), at: Iso }).optional(),
});
export const StatusResponse = z.object({ statuses: z.array(DeliveryStatus).max(MAX_STATUS_IDS) });
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;
export type StatusResponse = z.infer<typeof StatusResponse>;

/** POST /federation/v1/notices: agents of the sending domain whose directory record changed. */
export const NoticeRequest = z.strictObject({ agents: z.array(AgentId).min(1).max(500) });
export const NoticeResponse = z.object({ ok: z.literal(true) });

/** POST /api/v1/federation/peers (admin): admit a peer. Its fields are one word each. */
export const AddPeerRequest = z.strictObject({
  domain: FederationDomain,
  /** Its federation endpoint's origin or its `/.well-known/acp` base; default `https://<domain>`. */
  url: z.url().max(2048).optional(),
  /** Pin these keys instead of those its `/.well-known/acp` shows now. */
  keys: z.array(GatewayKey).min(1).max(16).optional(),
});
export type AddPeerRequest = z.infer<typeof AddPeerRequest>;

export const PeerState = z.enum(["allowed", "blocked"]);

/**
 * A peer as the federation extension builds it; the admin API answers it as `PeerAnswer` and
 * `acp federation list|status` show that.
 */
export interface PeerView {
  domain: string;
  state: z.infer<typeof PeerState>;
  /** Where this gateway looks for its `/.well-known/acp`. */
  url: string;
  /** Its federation endpoint, once known. */
  endpoint?: string;
  /** Admitted by an admin, or by the open policy at first contact. */
  admittedBy: "admin" | "open-policy";
  pinnedKeys: string[];
  /** Keys its `/.well-known/acp` showed that are not pinned: refused until an admin accepts them. */
  pendingKeys?: { kids: string[]; seenAt: string };
  addedAt: string;
  /** Link health as this gateway process sees it. */
  link?: PeerLink;
}

export interface PeerLink {
  /** Messages waiting in its outbound queue here, and the oldest one's age. */
  queued: number;
  oldestQueuedSeconds: number | null;
  lastContactAt: string | null;
  /** The last failure to reach it, while it lasts. */
  lastError: string | null;
  /** Requests or messages of this peer refused, by reason. */
  refusals: Record<string, number>;
  forwarded: number;
  received: number;
}

/** GET /api/v1/federation: this gateway's federation identity and policy, and every peer. */
export interface FederationStatusView {
  domain: string;
  endpoint: string;
  policy: "allow-list" | "open";
  keys: string[];
  peers: PeerView[];
}

/**
 * The admin API's answers: snake_case (`pinned_keys`, `link.last_error`), each field also under its
 * camelCase name for the deprecation period (docs/gateway.md, "One casing").
 */
export type PeerAnswer = RestAnswer<PeerView>;
export type FederationStatusAnswer = RestAnswer<FederationStatusView>;
