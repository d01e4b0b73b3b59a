import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Broker } from "../broker/index.js";

/**
 * API keys: `acp_` + 32 random bytes (base64url). High entropy, so a single SHA-256 is a sound
 * storage hash (no password stretching needed) and lookups stay O(1) by hash.
 */
export function newApiKey(): string {
  return `acp_${randomBytes(32).toString("base64url")}`;
}

/** A fresh admin token (`acpadm_` and 256 random bits), strong enough for `checkAdminTokenStrength`. */
export function newAdminToken(): string {
  return `acpadm_${randomBytes(32).toString("base64url")}`;
}

/** An admin token the operator chooses must be at least this long… */
export const MIN_ADMIN_TOKEN_LENGTH = 32;
/** …and carry about this much entropy (estimated by `estimatedEntropyBits`). */
export const MIN_ADMIN_TOKEN_BITS = 128;

/**
 * A rough upper estimate of a secret's entropy: its length times the Shannon entropy of its
 * characters' frequencies. A repeated word, a short alphabet or a padded phrase scores low; a
 * random token of the same length scores near its true strength.
 */
export function estimatedEntropyBits(secret: string): number {
  const chars = [...secret];
  const counts = new Map<string, number>();
  for (const char of chars) counts.set(char, (counts.get(char) ?? 0) + 1);
  let perChar = 0;
  for (const count of counts.values()) {
    const p = count / chars.length;
    perChar -= p * Math.log2(p);
  }
  return perChar * chars.length;
}

/**
 * Refuses a weak admin token at start, naming where it came from (`source`: the environment
 * variable or option) and never repeating it. The admin token registers and revokes agents.
 */
export function checkAdminTokenStrength(token: string, source: string): void {
  const length = [...token].length;
  const bits = Math.floor(estimatedEntropyBits(token));
  if (length >= MIN_ADMIN_TOKEN_LENGTH && bits >= MIN_ADMIN_TOKEN_BITS) return;
  throw new Error(
    `${source} is too weak for the admin token (${length} characters, about ${bits} bits): it needs at least ` +
      `${MIN_ADMIN_TOKEN_LENGTH} characters and ${MIN_ADMIN_TOKEN_BITS} bits; make one with \`openssl rand -base64 32\`, ` +
      "or leave it unset and the gateway generates one",
  );
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(hashSecret(a), "hex");
  const y = Buffer.from(hashSecret(b), "hex");
  return timingSafeEqual(x, y);
}

/**
 * The credential of a request: `X-API-Key`, `Api-Key`, or `Authorization: Bearer …` (the ACP messaging
 * platform).
 */
export function credentialOf(headers: IncomingHttpHeaders): string | undefined {
  const direct = headers["x-api-key"] ?? headers["api-key"];
  if (typeof direct === "string" && direct.length > 0) return direct.trim();
  const authorization = headers.authorization;
  if (typeof authorization === "string") {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) return match[1];
  }
  return undefined;
}

/** The admin token the operator configured (option, else `ACP_ADMIN_TOKEN`), refused if weak. */
export function configuredAdminToken(option: string | undefined): string | undefined {
  const [token, source] =
    option !== undefined
      ? [option, "the adminToken option"]
      : [process.env.ACP_ADMIN_TOKEN, "ACP_ADMIN_TOKEN"];
  if (!token) return undefined;
  checkAdminTokenStrength(token, source);
  return token;
}

/** The admin token: configured, else the stored hash, else a new one generated (and stored hashed). */
export async function resolveAdminToken(broker: Broker, configured: string | undefined) {
  if (configured) return { token: configured, hash: hashSecret(configured), created: false };
  const config = broker.kv<{ adminTokenHash: string }>("config");
  const existing = await config.get("admin");
  if (existing) return { token: undefined, hash: existing.value.adminTokenHash, created: false };
  const token = newAdminToken();
  try {
    await config.create("admin", { adminTokenHash: hashSecret(token) });
    return { token, hash: hashSecret(token), created: true };
  } catch {
    // Another gateway on the same NATS created it first.
    const winner = await config.get("admin");
    return { token: undefined, hash: winner?.value.adminTokenHash ?? hashSecret(token), created: false };
  }
}
