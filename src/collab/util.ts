import { createHash } from "node:crypto";
import { z } from "zod";
import { AcpError, canonicalize, problemsOf } from "../protocol/index.js";

/** The agent id that qualifies an id in its creator's namespace (protocol/address.ts's grammar). */
const OWNER = "[A-Za-z0-9][A-Za-z0-9_-]{0,127}";

/**
 * Ids of collaboration objects (sessions, handoffs, votes, entries, posts, disputes). They are KV
 * keys and path segments on both brokers, so they stay within `[A-Za-z0-9_.-]`. An id its creator
 * chooses is in the creator's namespace, `<agent-id>.<id>` (see ownId): ids without the prefix are
 * those of records stored before ids had namespaces, still read and addressed as they are.
 */
export const CollabId = z
  .string()
  .regex(
    new RegExp(`^(?:${OWNER}\\.)?[A-Za-z0-9][A-Za-z0-9_-]{7,127}$`),
    "must be 8-128 characters of A-Z a-z 0-9 _ - (a UUID is ideal), after its creator's agent id and a dot",
  );

/** Team and channel names are chosen by people, so they may be short. */
export const ShortName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/,
    "must be 1-64 characters of A-Z a-z 0-9 _ - starting alphanumeric",
  );

/** A team's id: its creator's agent id, a dot, and the name the creator gave it (`alice.crew`). */
export const TeamId = z
  .string()
  .regex(
    new RegExp(`^(?:${OWNER}\\.)?[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`),
    "must be the creator's agent id, a dot and 1-64 characters of A-Z a-z 0-9 _ -",
  );

/**
 * `id` in `agentId`'s namespace: as it is when it already names an owner, else `<agentId>.<id>`.
 * The SDK qualifies every id an agent chooses, so two agents may both call a team `crew`.
 */
export function ownId(agentId: string, id: string): string {
  return id.includes(".") ? id : `${agentId}.${id}`;
}

/**
 * Refuses to create a record whose id is not in the creator's namespace. Checked before anything
 * is looked up, so the answer is the same whether or not someone else's record has that id: ids
 * are no existence oracle, and nobody can take an id another agent will use.
 */
export function requireOwnId(id: string, agentId: string, pointer: string, what: string): void {
  if (id.startsWith(`${agentId}.`)) return;
  throw new AcpError(
    "InvalidParams",
    `${what} id ${id} is not in ${agentId}'s namespace: ids ${agentId} creates start with "${agentId}."`,
    { problems: [{ path: pointer, message: `must start with ${agentId}.` }] },
  );
}

export const JsonObject = z.record(z.string(), z.unknown());

/** SHA-256 of the RFC 8785 canonical form, base64url: the hash of every collaboration record. */
export function canonicalHash(value: unknown): string {
  return createHash("sha256").update(canonicalize(value)).digest("base64url");
}

/** Parses with a schema or throws InvalidParams naming every wrong field. */
export function parseOrThrow<T>(schema: z.ZodType<T>, input: unknown, what: string, base = ""): T {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = problemsOf(parsed.error, base);
  const first = problems[0];
  throw new AcpError(
    "InvalidParams",
    `invalid ${what}${first ? `: ${first.path || "/"} ${first.message}` : ""}`,
    { problems },
  );
}

/** A key part that sorts by time: milliseconds since the epoch, zero-padded. */
export function sortableTime(at: Date): string {
  return String(at.getTime()).padStart(15, "0");
}

export function notFound(what: string, id: string): AcpError {
  return new AcpError("NotFound", `no ${what} ${id}`);
}

export function conflict(message: string, extra: Record<string, unknown> = {}): AcpError {
  return new AcpError("Conflict", message, extra);
}

export function forbidden(message: string): AcpError {
  return new AcpError("Forbidden", message);
}
