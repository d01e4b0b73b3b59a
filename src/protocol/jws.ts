import { sign as edSign, verify as edVerify, type KeyObject } from "node:crypto";
import { localPartOf } from "./address.js";
import { CanonicalizationError, canonicalize } from "./canonical.js";
import { AcpError } from "./errors.js";
import { agentOfKeyId, importPrivateKey, keyId, type PrivateIdentity } from "./keys.js";
import type { AcpMessage } from "./schemas.js";
import { headersOf } from "./validate.js";

/**
 * Per-message signatures: Ed25519 over the RFC 8785 canonical bytes of the message without its
 * `signature` member, carried as a detached compact JWS (RFC 7515 appendix F, `alg: EdDSA`):
 *
 *   signature     = BASE64URL(protected) ".." BASE64URL(Ed25519(signingInput))
 *   signingInput  = BASE64URL(protected) "." BASE64URL(UTF8(JCS(message minus "signature")))
 *   protected     = JCS({"alg":"EdDSA","kid":"<agent-id>#<key thumbprint>"})
 *
 * The same construction A2A uses for signed agent cards. Because the routing headers
 * (`recipient-id`, `message-id`, `timestamp`) are inside the signed bytes, a signed message can be
 * neither re-routed nor replayed undetected.
 */
export interface Signer {
  agentId: string;
  kid: string;
  privateKey: KeyObject;
  /** BASE64URL(JCS(protected header)), fixed per key. */
  protectedB64: string;
}

/**
 * Prepares an identity's Ed25519 key for signing many messages (`signMessage`); the key id is
 * derived from the public key, never read from the file, so verifiers arrive at the same one.
 */
export function createSigner(identity: PrivateIdentity): Signer {
  // Always derived, never taken from the file: verifiers derive the same id from the public key.
  const kid = keyId(identity.agentId, identity.signing);
  return {
    agentId: identity.agentId,
    kid,
    privateKey: importPrivateKey(identity.signing),
    protectedB64: Buffer.from(canonicalize({ alg: "EdDSA", kid })).toString("base64url"),
  };
}

/** The exact bytes that are signed (exposed for test vectors and other implementations). */
export function signingInput(protectedB64: string, message: object): Buffer {
  const { signature: _detached, ...unsigned } = message as { signature?: unknown };
  const payload = Buffer.from(canonicalize(unsigned)).toString("base64url");
  return Buffer.from(`${protectedB64}.${payload}`, "ascii");
}

/** Returns a copy of the message with its `signature` member set. */
export function signMessage<M extends object>(message: M, signer: Signer): M & { signature: string } {
  const sig = edSign(null, signingInput(signer.protectedB64, message), signer.privateKey);
  return { ...message, signature: `${signer.protectedB64}..${sig.toString("base64url")}` };
}

export interface ProtectedHeader {
  alg: string;
  kid: string;
}

const headerCache = new Map<string, ProtectedHeader>();

/** Decodes and checks the protected header; cached because one agent's header never changes. */
export function decodeProtectedHeader(protectedB64: string): ProtectedHeader {
  const cached = headerCache.get(protectedB64);
  if (cached) return cached;
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(protectedB64, "base64url").toString("utf8"));
  } catch {
    throw invalid("the JWS protected header is not base64url JSON");
  }
  const { alg, kid, crit } = (header ?? {}) as Record<string, unknown>;
  // RFC 7515 section 4.1.11: a critical extension the verifier does not understand must be refused.
  if (crit !== undefined) throw invalid("the JWS protected header has crit extensions ACP does not define");
  if (alg !== "EdDSA")
    throw invalid(`unsupported JWS alg ${JSON.stringify(alg)}; ACP requires EdDSA (Ed25519)`);
  if (typeof kid !== "string" || kid.length === 0) throw invalid("the JWS protected header has no kid");
  const decoded = { alg, kid };
  if (headerCache.size > 4096) headerCache.clear();
  headerCache.set(protectedB64, decoded);
  return decoded;
}

function invalid(message: string): AcpError {
  return new AcpError("SignatureInvalid", message, { problems: [{ path: "/signature", message }] });
}

/**
 * Finds the public key for an agent's key id, or undefined when none is registered. `signedAt` is the
 * message's timestamp, for a resolver that also takes an earlier key of the agent's key history for
 * what it signed while it was current (`signingKeyAt`).
 */
export type KeyResolver = (agentId: string, kid: string, signedAt?: string) => KeyObject | undefined;

/**
 * Verifies a message's detached JWS against the key its signer registered. The signer (kid's agent)
 * must be the agent named in the message's `agent-id` header (its local part, for an address). Throws AcpError on any failure.
 * Returns the key id that signed it.
 */
export function verifyMessageSignature(message: AcpMessage, resolveKey: KeyResolver): string {
  const check = prepareSignatureCheck(message, resolveKey);
  if (!edVerify(null, check.data, check.key, check.sig)) throw signatureMismatch();
  return check.kid;
}

/**
 * The same checks as `verifyMessageSignature`; the Ed25519 verify itself runs on libuv's thread pool,
 * so a server keeps its event loop for other work and uses the machine's other cores. (The gateway
 * batches its verifies on a thread of its own instead: `SignatureVerifier`.)
 * Errors found before the verify (no signature, unknown key…) reject the same way.
 */
export function verifyMessageSignatureAsync(message: AcpMessage, resolveKey: KeyResolver): Promise<string> {
  let check: SignatureCheck;
  try {
    check = prepareSignatureCheck(message, resolveKey);
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    edVerify(null, check.data, check.key, check.sig, (err, ok) => {
      if (err) reject(err);
      else if (!ok) reject(signatureMismatch());
      else resolve(check.kid);
    });
  });
}

/** A message's signature, checked up to the Ed25519 verify itself: verify `sig` over `data` with `key`. */
export interface SignatureCheck {
  kid: string;
  key: KeyObject;
  data: Buffer;
  sig: Buffer;
}

/** The key id a message's signature names (its protected header), without verifying the signature. */
export function signatureKeyId(message: AcpMessage): string {
  const signature = (message as { signature?: unknown }).signature;
  const separator = typeof signature === "string" ? signature.indexOf("..") : -1;
  if (separator <= 0) throw invalid("the signature is not a detached compact JWS (header..signature)");
  return decodeProtectedHeader((signature as string).slice(0, separator)).kid;
}

/**
 * Everything but the Ed25519 verify: the JWS form, the signer's key, the signed bytes. For a caller
 * that runs the verify elsewhere (the gateway's verify thread); a false verify is `signatureMismatch()`.
 */
export function prepareSignatureCheck(message: AcpMessage, resolveKey: KeyResolver): SignatureCheck {
  const signature = (message as { signature?: unknown }).signature;
  if (typeof signature !== "string") {
    throw new AcpError("SignatureMissing", "the message carries no signature", {
      problems: [{ path: "/signature", message: "every message must be signed" }],
    });
  }
  const separator = signature.indexOf("..");
  if (separator <= 0 || signature.indexOf(".", separator + 2) !== -1) {
    throw invalid("the signature is not a detached compact JWS (header..signature)");
  }
  const protectedB64 = signature.slice(0, separator);
  const { kid } = decodeProtectedHeader(protectedB64);
  const agentId = headersOf(message)?.["agent-id"];
  // A key is named by the agent's own id; a message to another domain names the agent by its
  // address (`alpha@a.example`), whose local part is that id.
  if (typeof agentId !== "string" || agentOfKeyId(kid) !== localPartOf(agentId)) {
    throw invalid(`signed with key ${kid}, which does not belong to agent-id ${String(agentId)}`);
  }
  const timestamp = headersOf(message)?.timestamp;
  const key = resolveKey(agentId, kid, typeof timestamp === "string" ? timestamp : undefined);
  if (!key) {
    throw new AcpError("UnknownKey", `no registered public key ${kid}`, {
      problems: [{ path: "/signature", message: `key ${kid} is not registered for ${agentId}` }],
      kid,
    });
  }
  const encodedSig = signature.slice(separator + 2);
  const sig = Buffer.from(encodedSig, "base64url");
  // Exactly one encoding of the 64 bytes is accepted, so a signature string cannot be varied.
  if (sig.length !== 64 || sig.toString("base64url") !== encodedSig) {
    throw invalid("the signature is not 64 base64url-encoded bytes");
  }
  return { kid, key, sig, data: signedBytes(protectedB64, message) };
}

export function signatureMismatch(): AcpError {
  return invalid("the signature does not match the message (tampered, re-routed, or signed by another key)");
}

/** The signing input of a received message; a value JCS cannot represent was never validly signed. */
function signedBytes(protectedB64: string, message: AcpMessage): Buffer {
  try {
    return signingInput(protectedB64, message);
  } catch (err) {
    if (!(err instanceof CanonicalizationError)) throw err;
    throw new AcpError("InvalidParams", `the message cannot be canonicalized: ${err.message}`, {
      problems: [{ path: err.path, message: err.message }],
    });
  }
}
