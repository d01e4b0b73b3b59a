import { createHash } from "node:crypto";
import { z } from "zod";
import { AcpError, canonicalize, problemsOf } from "../protocol/index.js";

/**
 * Ids of collaboration objects (sessions, handoffs, votes, entries, posts, disputes, teams). They
 * are KV keys and path segments on both brokers, so they stay within `[A-Za-z0-9_-]`.
 */
export const CollabId = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]{7,127}$/,
    "must be 8-128 characters of A-Z a-z 0-9 _ - (a UUID is ideal)",
  );

/** Team and channel names are chosen by people, so they may be short. */
export const ShortName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/,
    "must be 1-64 characters of A-Z a-z 0-9 _ - starting alphanumeric",
  );

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
