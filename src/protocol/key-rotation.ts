import { sign as edSign, verify as edVerify } from "node:crypto";
import { AcpError } from "./errors.js";
import { createSigner, decodeProtectedHeader, signingInput } from "./jws.js";
import { type Ed25519PublicJwk, importPublicKey, keyId, type PrivateIdentity } from "./keys.js";

/**
 * An agent's new signing key, vouched for by its current one (docs/federation.md, "Identity
 * lifecycle"): the handover is a detached JWS by the current key over `{agentId, successor, x}`
 * of the new key, so anyone holding the key history can check the chain from key to key.
 */
export function handoverPayload(
  agentId: string,
  next: { kty: string; crv: string; x: string },
): { agentId: string; successor: string; x: string } {
  return { agentId, successor: keyId(agentId, next), x: next.x };
}

/** The handover `current` signs for its successor `next`. */
export function signHandover(current: PrivateIdentity, next: Ed25519PublicJwk): string {
  const signer = createSigner(current);
  const payload = handoverPayload(current.agentId, next);
  const sig = edSign(null, signingInput(signer.protectedB64, payload), signer.privateKey);
  return `${signer.protectedB64}..${sig.toString("base64url")}`;
}

/** Checks that `handover` is `current`'s signature over `next`; throws SignatureInvalid naming why. */
export function verifyHandover(
  agentId: string,
  current: Ed25519PublicJwk,
  next: Ed25519PublicJwk,
  handover: string,
  path = "/handover",
): void {
  const refuse = (why: string) =>
    new AcpError("SignatureInvalid", `the handover ${why}`, { problems: [{ path, message: why }] });
  const [protectedB64, encoded, extra] = handover.split("..");
  if (!protectedB64 || !encoded || extra !== undefined) throw refuse("is not a detached JWS");
  const { kid } = decodeProtectedHeader(protectedB64);
  if (kid !== keyId(agentId, current)) throw refuse(`is signed by ${kid}, not by the current key`);
  const sig = Buffer.from(encoded, "base64url");
  const input = signingInput(protectedB64, handoverPayload(agentId, next));
  if (sig.length !== 64 || !edVerify(null, input, importPublicKey(current), sig)) {
    throw refuse("does not verify against the current key");
  }
}

/** An earlier signing key of an agent, as its key history lists it: it was current until `until`. */
export interface EarlierKey {
  kid: string;
  x: string;
  until: string;
}

/**
 * The signing key `kid` names among an agent's keys: its current key (by its thumbprint key id or
 * the `kid` it was registered with), or an earlier one of its key history for a message signed
 * (`signedAt`, its timestamp) while that key was still current. A key is valid for what it signed
 * while it was current, never after; a revoked agent's keys are the caller's to refuse.
 */
export function signingKeyAt(
  agentId: string,
  current: Ed25519PublicJwk,
  history: readonly EarlierKey[] | undefined,
  kid: string,
  signedAt: string | undefined,
): Ed25519PublicJwk | undefined {
  if (kid === keyId(agentId, current) || (current.kid !== undefined && kid === current.kid)) return current;
  const earlier = history?.find((entry) => entry.kid === kid);
  if (!earlier || signedAt === undefined || !(Date.parse(signedAt) < Date.parse(earlier.until)))
    return undefined;
  return { kty: "OKP", crv: "Ed25519", x: earlier.x, kid };
}
