import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/**
 * API keys: `acp_` + 32 random bytes (base64url). High entropy, so a single SHA-256 is a sound
 * storage hash (no password stretching needed) and lookups stay O(1) by hash.
 */
export function newApiKey(): string {
  return `acp_${randomBytes(32).toString("base64url")}`;
}

export function newAdminToken(): string {
  return `acpadm_${randomBytes(32).toString("base64url")}`;
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
