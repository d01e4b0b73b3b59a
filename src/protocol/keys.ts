import { createHash, createPrivateKey, createPublicKey, type KeyObject, randomBytes } from "node:crypto";
import { z } from "zod";
import { canonicalize } from "./canonical.js";
import { AcpError, problemsOf } from "./errors.js";
import { AgentId, PrincipalId } from "./schemas.js";

/**
 * Keys are JWKs (RFC 7517/8037): Ed25519 for signatures, X25519 for end-to-end encryption.
 * A key id (`kid`) is `<agent-id>#<RFC 7638 thumbprint>`, so a signature names both the agent and
 * the exact key, and a key change is visible to the peer.
 */
const b64url = z.string().regex(/^[A-Za-z0-9_-]+$/, "must be base64url");

export const Ed25519PublicJwk = z.object({
  kty: z.literal("OKP"),
  crv: z.literal("Ed25519"),
  x: b64url.length(43, "must be a 32-byte key (43 base64url characters)"),
  kid: z.string().optional(),
});
export const X25519PublicJwk = z.object({
  kty: z.literal("OKP"),
  crv: z.literal("X25519"),
  x: b64url.length(43, "must be a 32-byte key (43 base64url characters)"),
  kid: z.string().optional(),
});
const withPrivate = { d: b64url.length(43, "must be a 32-byte private key") };
export const Ed25519PrivateJwk = Ed25519PublicJwk.extend(withPrivate);
export const X25519PrivateJwk = X25519PublicJwk.extend(withPrivate);

/** What others need to know of an agent: who it is, for whom, and its public keys. */
export const PublicIdentity = z.strictObject({
  agentId: AgentId,
  principalId: PrincipalId,
  signing: Ed25519PublicJwk,
  encryption: X25519PublicJwk.optional(),
});

/** A private key file (`acp keygen`), mode 0600. */
export const PrivateIdentity = z.strictObject({
  agentId: AgentId,
  principalId: PrincipalId,
  signing: Ed25519PrivateJwk,
  encryption: X25519PrivateJwk,
  createdAt: z.iso.datetime({ offset: true }).optional(),
});

export type Ed25519PublicJwk = z.infer<typeof Ed25519PublicJwk>;
export type X25519PublicJwk = z.infer<typeof X25519PublicJwk>;
export type PublicIdentity = z.infer<typeof PublicIdentity>;
export type PrivateIdentity = z.infer<typeof PrivateIdentity>;

/** RFC 7638 JWK thumbprint (SHA-256, base64url) over the required OKP members. */
export function jwkThumbprint(jwk: { kty: string; crv: string; x: string }): string {
  const required = canonicalize({ crv: jwk.crv, kty: jwk.kty, x: jwk.x });
  return createHash("sha256").update(required).digest("base64url");
}

/** A key's id as messages name it: `<agentId>#<JWK thumbprint>`. */
export function keyId(agentId: string, jwk: { kty: string; crv: string; x: string }): string {
  return `${agentId}#${jwkThumbprint(jwk)}`;
}

/** The agent named by a key id (`agent#thumbprint`). */
export function agentOfKeyId(kid: string): string {
  const hash = kid.indexOf("#");
  return hash === -1 ? kid : kid.slice(0, hash);
}

function publicOnly<T extends { d?: string }>(jwk: T): Omit<T, "d"> {
  const { d: _private, ...rest } = jwk;
  return rest;
}

/** PKCS#8 DER before a 32-byte private key (RFC 8410). */
const PKCS8_PREFIX = {
  ed25519: Buffer.from("302e020100300506032b657004220420", "hex"),
  x25519: Buffer.from("302e020100300506032b656e04220420", "hex"),
} as const;

/**
 * A fresh Ed25519 or X25519 private key as a JWK (with `x` and `d`), made from 32 random bytes.
 * Not from `generateKeyPairSync`: on Node 20, exporting a generated key as a JWK deadlocks the
 * process when a garbage collection during the export finalises the key's generation job, as
 * both take the key's lock (seen as a hung identity fill: ExportJWK, GC, ~KeyGenJob, mutex).
 */
export function generatePrivateJwk(curve: "ed25519" | "x25519"): PrivateOkpJwk {
  return privateJwkOf(curve, randomBytes(32));
}

/** An Ed25519 or X25519 private JWK. */
export interface PrivateOkpJwk {
  kty: string;
  crv: string;
  x: string;
  d: string;
}

/** The private JWK whose 32-byte private key is `seed` (RFC 8032's seed, RFC 7748's scalar). */
export function privateJwkOf(curve: "ed25519" | "x25519", seed: Uint8Array): PrivateOkpJwk {
  if (seed.length !== 32) throw new RangeError(`a ${curve} private key is 32 bytes, not ${seed.length}`);
  const der = Buffer.concat([PKCS8_PREFIX[curve], seed]);
  const jwk = createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "jwk" });
  return { kty: String(jwk.kty), crv: String(jwk.crv), x: String(jwk.x), d: String(jwk.d) };
}

/** Creates an identity with fresh Ed25519 (signing) and X25519 (encryption) key pairs. */
export function generateIdentity(agentId: string, principalId: string, now = new Date()): PrivateIdentity {
  AgentId.parse(agentId);
  PrincipalId.parse(principalId);
  const signing = generatePrivateJwk("ed25519");
  const encryption = generatePrivateJwk("x25519");
  return PrivateIdentity.parse({
    agentId,
    principalId,
    signing: { ...signing, kid: keyId(agentId, signing as Ed25519PublicJwk) },
    encryption: { ...encryption, kid: keyId(agentId, encryption as X25519PublicJwk) },
    createdAt: now.toISOString(),
  });
}

/** The shareable half of an identity: ids and public keys, the private `d` members left out. */
export function publicIdentity(identity: PrivateIdentity): PublicIdentity {
  return {
    agentId: identity.agentId,
    principalId: identity.principalId,
    signing: publicOnly(identity.signing),
    encryption: publicOnly(identity.encryption),
  };
}

/** Parses untrusted public-identity JSON, naming each bad field (-32602). */
export function parsePublicIdentity(input: unknown): PublicIdentity {
  const parsed = PublicIdentity.safeParse(input);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", "invalid public identity", {
      problems: problemsOf(parsed.error),
    });
  }
  return parsed.data;
}

/** A public JWK (Ed25519 or X25519) as a Node `KeyObject`, for `crypto.verify` or ECDH. */
export function importPublicKey(jwk: Ed25519PublicJwk | X25519PublicJwk): KeyObject {
  return createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: "jwk" });
}

/** A private JWK as a Node `KeyObject`. */
export function importPrivateKey(jwk: { kty: string; crv: string; x: string; d: string }): KeyObject {
  return createPrivateKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d }, format: "jwk" });
}
