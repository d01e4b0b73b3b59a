import { constants, createPublicKey, type JsonWebKey, type KeyObject, verify } from "node:crypto";
import { z } from "zod";
import type { OutboundPolicy } from "../../../http/outbound.js";
import { AcpError, canonicalize } from "../../../protocol/index.js";
import type { CardVerification } from "../../../wire/a2a-outbound.js";
import { type A2ACardSignature, causeOf } from "./card.js";

/**
 * A2A §8.4 signed agent cards: each entry of `signatures` is a JWS (flattened, detached payload) over
 * the RFC 8785 canonical card without its `signatures` member. A card that carries signatures must
 * have one that verifies, else it is refused; the key comes from the keys the admin pinned, or else
 * from the JWKS the protected header's `jku` names on the card's own origin.
 */
const ProtectedHeader = z.object({
  alg: z.string().min(1),
  kid: z.string().optional(),
  jku: z.string().optional(),
});

const Jwks = z.object({ keys: z.array(z.record(z.string(), z.unknown())) });
const JWKS_LIMIT = 64 * 1024;

export async function verifyCardSignatures(
  raw: Record<string, unknown>,
  signatures: readonly A2ACardSignature[],
  options: { cardUrl: string; outbound: OutboundPolicy; pinnedKeys?: readonly JsonWebKey[] },
): Promise<CardVerification> {
  const pinned = options.pinnedKeys ?? [];
  if (signatures.length === 0) {
    if (pinned.length > 0) {
      throw new AcpError("SignatureMissing", "a card key was pinned but the agent card is not signed", {
        problems: [{ path: "/card/signatures", message: "missing (a signing key was pinned)" }],
      });
    }
    return { signed: false };
  }
  const payloads = await canonicalPayloads(raw);
  const failures: string[] = [];
  for (const [index, entry] of signatures.entries()) {
    const header = decodeHeader(entry.protected, index);
    const keys =
      pinned.length > 0
        ? pinnedFor(pinned, header.kid)
        : await jkuKeys(header, options.cardUrl, options.outbound, index);
    for (const key of keys) {
      for (const payload of payloads) {
        if (verifies(header.alg, key, `${entry.protected}.${payload}`, entry.signature, index)) {
          return {
            signed: true,
            ...(header.kid ? { kid: header.kid } : {}),
            keySource: pinned.length ? "pinned" : "jku",
          };
        }
      }
    }
    failures.push(`signature ${index} (kid ${header.kid ?? "none"}) does not verify`);
  }
  throw new AcpError(
    "SignatureInvalid",
    `the agent card's signatures do not verify: ${failures.join("; ")}`,
    {
      problems: signatures.map((_, i) => ({ path: `/card/signatures/${i}`, message: "does not verify" })),
    },
  );
}

/**
 * The signed bytes. The A2A SDKs canonicalize the card after a round trip through the protobuf
 * schema (defaults and unknown members dropped); others sign the card as served. Both are tried.
 */
async function canonicalPayloads(raw: Record<string, unknown>): Promise<string[]> {
  const { signatures: _signatures, ...unsigned } = raw;
  const forms = [canonicalize(unsigned)];
  try {
    const { canonicalizeAgentCard } = await import("@a2a-js/sdk");
    forms.push(canonicalizeAgentCard(raw as never));
  } catch {
    // A card the SDK's schema cannot read has only its served form.
  }
  return [...new Set(forms)].map((form) => Buffer.from(form).toString("base64url"));
}

function decodeHeader(protectedB64: string, index: number): z.infer<typeof ProtectedHeader> {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(protectedB64, "base64url").toString("utf8"));
  } catch {
    decoded = undefined;
  }
  const parsed = ProtectedHeader.safeParse(decoded);
  if (!parsed.success) {
    throw new AcpError(
      "SignatureInvalid",
      `agent card signature ${index}: the protected header is not a JWS header with alg`,
      {
        problems: [{ path: `/card/signatures/${index}/protected`, message: "not a JWS protected header" }],
      },
    );
  }
  return parsed.data;
}

function pinnedFor(pinned: readonly JsonWebKey[], kid: string | undefined): KeyObject[] {
  const matching = kid ? pinned.filter((k) => k.kid === undefined || k.kid === kid) : pinned;
  return matching.map((jwk) => importJwk(jwk, "/cardKeys"));
}

/** The JWKS named by `jku`, only on the card's own origin (no fetching arbitrary URLs for a card). */
async function jkuKeys(
  header: z.infer<typeof ProtectedHeader>,
  cardUrl: string,
  outbound: OutboundPolicy,
  index: number,
): Promise<KeyObject[]> {
  const path = `/card/signatures/${index}/protected`;
  if (!header.jku) {
    throw new AcpError(
      "UnknownKey",
      `agent card signature ${index} names no jku and no card key was pinned: give the signer's public key (--card-key)`,
      { problems: [{ path, message: "no key to verify with" }] },
    );
  }
  let jku: URL;
  try {
    jku = new URL(header.jku, cardUrl);
  } catch {
    throw new AcpError("UnknownKey", `agent card signature ${index}: jku is not a URL`, {
      problems: [{ path, message: "jku is not a URL" }],
    });
  }
  if (jku.origin !== new URL(cardUrl).origin) {
    throw new AcpError(
      "UnknownKey",
      `agent card signature ${index}: jku ${jku.href} is not on the card's origin; pin the key instead (--card-key)`,
      { problems: [{ path, message: "jku on another origin" }] },
    );
  }
  let body: unknown;
  try {
    const response = await outbound.fetch(jku, {
      signal: AbortSignal.timeout(10_000),
      maxResponseBytes: JWKS_LIMIT,
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    body = await response.json();
  } catch (err) {
    throw new AcpError(
      "UnknownKey",
      `agent card signature ${index}: cannot fetch the JWKS at ${jku.href}: ${causeOf(err)}`,
      {
        problems: [{ path, message: "JWKS not available" }],
      },
    );
  }
  const jwks = Jwks.safeParse(body);
  if (!jwks.success) {
    throw new AcpError("UnknownKey", `agent card signature ${index}: ${jku.href} is not a JWKS`, {
      problems: [{ path, message: "jku does not serve a JWKS" }],
    });
  }
  const keys = jwks.data.keys.filter((k) => !header.kid || k.kid === header.kid);
  if (keys.length === 0) {
    throw new AcpError("UnknownKey", `agent card signature ${index}: no key ${header.kid} in ${jku.href}`, {
      problems: [{ path, message: `kid ${header.kid} not in the JWKS` }],
    });
  }
  return keys.map((k) => importJwk(k as JsonWebKey, path));
}

function importJwk(jwk: JsonWebKey, path: string): KeyObject {
  try {
    const { d: _private, ...publicPart } = jwk;
    return createPublicKey({ key: publicPart, format: "jwk" });
  } catch (err) {
    throw new AcpError("InvalidParams", `not a usable public JWK: ${(err as Error).message}`, {
      problems: [{ path, message: "not a public JWK" }],
    });
  }
}

const HASHES: Record<string, string> = { "256": "sha256", "384": "sha384", "512": "sha512" };

function verifies(alg: string, key: KeyObject, input: string, signatureB64: string, index: number): boolean {
  const data = Buffer.from(input, "ascii");
  const signature = Buffer.from(signatureB64, "base64url");
  const family = alg.slice(0, 2);
  const hash = HASHES[alg.slice(2)];
  try {
    if (alg === "EdDSA" || alg === "Ed25519") return verify(null, data, key, signature);
    if (family === "ES" && hash) return verify(hash, data, { key, dsaEncoding: "ieee-p1363" }, signature);
    if (family === "RS" && hash) return verify(hash, data, key, signature);
    if (family === "PS" && hash) {
      return verify(
        hash,
        data,
        { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(alg.slice(2)) / 8 },
        signature,
      );
    }
  } catch {
    // A key of another type than the algorithm: does not verify.
    return false;
  }
  throw new AcpError("SignatureInvalid", `agent card signature ${index} uses unsupported algorithm ${alg}`, {
    problems: [{ path: `/card/signatures/${index}/protected`, message: `alg ${alg} not supported` }],
  });
}
