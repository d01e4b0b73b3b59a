import { CompactEncrypt, compactDecrypt, decodeProtectedHeader } from "jose";
import { AcpError } from "./errors.js";
import { importPrivateKey, importPublicKey, type PrivateIdentity, type X25519PublicJwk } from "./keys.js";
import { EncryptedBody } from "./schemas.js";

/**
 * End-to-end encryption of a message body to its recipient (the ACP core protocol's security floor, item 4):
 * a compact JWE (RFC 7516) with ECDH-ES key agreement on X25519 and A256GCM content encryption
 * (RFC 7518 / RFC 8037). The sender encrypts first, then signs the whole message, so the gateway
 * can verify and route without reading the body. The protected header names sender and recipient
 * (`acp-from`, `acp-to`); it is authenticated by AES-GCM, so a JWE lifted into another agent's
 * message is refused on decryption.
 */
const decoder = new TextDecoder();

/** Whether a message body is an end-to-end encrypted one (`{ jwe }`), to decrypt before use. */
export function isEncryptedBody(body: unknown): body is EncryptedBody {
  // Asked of every body received: one without a `jwe` member is told apart without the schema.
  if (typeof body !== "object" || body === null || !("jwe" in body)) return false;
  return EncryptedBody.safeParse(body).success;
}

/** Who the body goes from and to (bound into the JWE header), and the recipient's X25519 key. */
export interface EncryptFor {
  senderId: string;
  recipientId: string;
  recipientKey: X25519PublicJwk;
}

/**
 * Encrypts a body to its recipient (JWE, ECDH-ES with A256GCM); sender and recipient are in the
 * protected header, so the ciphertext cannot be moved to another conversation. Sign after this.
 */
export async function encryptBody(body: Record<string, unknown>, target: EncryptFor): Promise<EncryptedBody> {
  const jwe = await new CompactEncrypt(new TextEncoder().encode(JSON.stringify(body)))
    .setProtectedHeader({
      alg: "ECDH-ES",
      enc: "A256GCM",
      ...(target.recipientKey.kid ? { kid: target.recipientKey.kid } : {}),
      "acp-from": target.senderId,
      "acp-to": target.recipientId,
    })
    .encrypt(importPublicKey(target.recipientKey));
  return { jwe };
}

function failed(message: string): AcpError {
  return new AcpError("DecryptionFailed", message, { problems: [{ path: "/params/body/jwe", message }] });
}

/**
 * Decrypts a body encrypted to `recipient`; `senderId` is the verified signer of the message (its
 * `agent-id` header). A body from another domain is encrypted to the recipient's address
 * (`recipientAddress`, docs/federation.md) rather than to its agent id.
 */
export async function decryptBody(
  body: EncryptedBody,
  recipient: PrivateIdentity,
  senderId: string,
  recipientAddress?: string,
): Promise<Record<string, unknown>> {
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(body.jwe) as Record<string, unknown>;
  } catch {
    throw failed("the JWE protected header cannot be decoded");
  }
  if (
    header["acp-to"] !== recipient.agentId &&
    (recipientAddress === undefined || header["acp-to"] !== recipientAddress)
  )
    throw failed(`the body is encrypted to ${String(header["acp-to"])}`);
  if (header["acp-from"] !== senderId) {
    throw failed(`the body was encrypted by ${String(header["acp-from"])}, not by the signer ${senderId}`);
  }
  let plaintext: Uint8Array;
  try {
    ({ plaintext } = await compactDecrypt(body.jwe, importPrivateKey(recipient.encryption), {
      keyManagementAlgorithms: ["ECDH-ES"],
      contentEncryptionAlgorithms: ["A256GCM"],
    }));
  } catch {
    throw failed("the JWE cannot be decrypted with this agent's encryption key");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(plaintext));
  } catch {
    throw failed("the decrypted body is not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw failed("the decrypted body is not a JSON object");
  return parsed as Record<string, unknown>;
}
