import { z } from "zod";
import { AgentRef } from "../protocol/address.js";
import { canonicalJson, sha256Hex } from "./canonical.js";

/** `prev` of the very first entry of an agent's log: nothing came before it. */
export const GENESIS_HASH = "0".repeat(64);

/**
 * The protocol's agent ids, or an agent's address at another gateway (`agent-id@domain`, whose
 * messages a gateway logs under it): either is a safe directory name.
 */
export const AuditAgentId = AgentRef;

const Hash = z.string().regex(/^[0-9a-f]{64}$/, "must be 64 lowercase hex digits (SHA-256)");

/** One side of an exchange. The principal is null when the message did not say and the caller did not know. */
export const AuditParty = z.strictObject({
  agent: z.string().min(1, "must not be empty"),
  principal: z.string().min(1, "must not be empty").nullable(),
});

export const HandshakeStep = z.enum(["announce", "verify", "capabilities", "trust"]);

/**
 * What the caller supplies for one entry: the ACP core protocol's fields (ts excepted, which the log stamps)
 * plus optional detail. `strictObject` everywhere: a field the schema does not know is an error, so nothing
 * can be smuggled into an entry without failing verification.
 */
export const AuditEntryInputSchema = z.strictObject({
  direction: z.enum(["sent", "received"]),
  from: AuditParty,
  to: AuditParty,
  /** The message type; `command` is an AgentCommand of the ACP v2.0 command layer (its answer is a `response`). */
  type: z.enum(["request", "response", "notification", "handoff", "command"]),
  method: z.string().min(1, "must not be empty"),
  /** The JSON-RPC id (a response carries its request's), else the `message-id` header; null if neither. */
  id: z.union([z.string(), z.int(), z.null()]),
  /** The `message-id` header when it differs from `id` (the gateway's dedup key). */
  messageId: z.string().min(1).optional(),
  /** Command layer: the AgentCommand's action (`ANALYZE`, …), on its command and response entries. */
  action: z.string().min(1, "must not be empty").optional(),
  /** Command layer: the AgentResponse's status (`success`, `failed`, …). */
  status: z.string().min(1, "must not be empty").optional(),
  /** Set on every entry that is part of the four-step handshake. */
  step: HandshakeStep.optional(),
  /** The body was end-to-end encrypted; the summary then says nothing of the payload. */
  encrypted: z.literal(true).optional(),
  /** The gateway signed this message on the sending agent's behalf, with the key it holds for it (custodial). */
  custodial: z.literal(true).optional(),
  /** An error response, or a message this agent rejected. */
  error: z.strictObject({ code: z.int(), message: z.string() }).optional(),
  summary: z.string(),
  /** The summary is the sender's own words (given with the message), not made by whoever logged it. */
  summaryBy: z.literal("sender").optional(),
  channel: z.string().min(1, "must not be empty"),
  /**
   * From the ACP core protocol's example: whether the summary was also posted to the human transparency
   * channel.
   */
  discord_summary: z.boolean().optional(),
});

export const AuditEntrySchema = z.strictObject({
  seq: z.int().positive(),
  ts: z.iso.datetime({ offset: true }),
  ...AuditEntryInputSchema.shape,
  prev: Hash,
  hash: Hash,
});

export type AuditParty = z.infer<typeof AuditParty>;
export type HandshakeStep = z.infer<typeof HandshakeStep>;
export type AuditEntryInput = z.infer<typeof AuditEntryInputSchema>;
export type AuditEntry = z.infer<typeof AuditEntrySchema>;

/** The last entry of the chain: the next one gets `seq + 1` and `prev = hash`. */
export interface AuditHead {
  seq: number;
  hash: string;
}

/** The hash an entry must carry: SHA-256 over the canonical JSON of every field except `hash`. */
export function computeEntryHash(entry: Record<string, unknown>): string {
  const { hash: _ignored, ...rest } = entry;
  return sha256Hex(canonicalJson(rest));
}

/**
 * Builds the stored entry with its fields in reading order (seq, ts, the core protocol's fields, detail,
 * prev, hash). The order is cosmetic: the hash is over the canonical, key-sorted form.
 */
export function sealEntry(
  input: AuditEntryInput,
  chain: { seq: number; ts: string; prev: string },
): AuditEntry {
  // Optional fields are added only when set (never added then deleted): an object that loses
  // properties turns into a slow dictionary, and this runs once per relayed message.
  const body: Record<string, unknown> = {
    seq: chain.seq,
    ts: chain.ts,
    direction: input.direction,
    from: input.from,
    to: input.to,
    type: input.type,
    method: input.method,
    id: input.id,
  };
  if (input.messageId !== undefined) body.messageId = input.messageId;
  if (input.action !== undefined) body.action = input.action;
  if (input.status !== undefined) body.status = input.status;
  if (input.step !== undefined) body.step = input.step;
  if (input.encrypted !== undefined) body.encrypted = input.encrypted;
  if (input.custodial !== undefined) body.custodial = input.custodial;
  if (input.error !== undefined) body.error = input.error;
  body.summary = input.summary;
  if (input.summaryBy !== undefined) body.summaryBy = input.summaryBy;
  body.channel = input.channel;
  if (input.discord_summary !== undefined) body.discord_summary = input.discord_summary;
  body.prev = chain.prev;
  body.hash = sha256Hex(canonicalJson(body));
  return body as AuditEntry;
}

/**
 * The entry of a message the gateway signed on the sender's behalf with its custodial key: the
 * field says so, and so does the summary (first, so no shortening can drop it).
 */
export function signedInCustody(entry: AuditEntryInput): AuditEntryInput {
  return {
    ...entry,
    custodial: true,
    summary: `Signed by the gateway on ${entry.from.agent}'s behalf (custodial key). ${entry.summary}`,
  };
}

/** The other side of the exchange, from the log owner's point of view. */
export function peerOf(entry: Pick<AuditEntry, "direction" | "from" | "to">): AuditParty {
  return entry.direction === "sent" ? entry.to : entry.from;
}

/** Formats a zod error as `field: problem; field: problem` for error messages. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(entry)"}: ${issue.message}`)
    .join("; ");
}
