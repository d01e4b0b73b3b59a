import { CompactEncrypt } from "jose";
import { describe, expect, it } from "vitest";
import {
  buildRequest,
  decryptBody,
  ErrorCode,
  encryptBody,
  importPublicKey,
  isEncryptedBody,
  publicIdentity,
  signMessage,
  validateMessage,
  verifyEnvelope,
} from "../../src/protocol/index.js";
import { acpErrorOfAsync, alpha, alphaSigner, beta, gamma, keyRing, senderOf } from "./fixtures.js";

const secret = { action: "share-medical-record", parameters: { patient: "principal-a", note: "é ✓ 😀" } };
const betaKey = publicIdentity(beta).encryption!;
const toBeta = { senderId: "agent-alpha", recipientId: "agent-beta", recipientKey: betaKey };

describe("end-to-end body encryption (JWE ECDH-ES X25519 + A256GCM)", () => {
  it("encrypts to the recipient, who decrypts the body exactly", async () => {
    const body = await encryptBody(secret, toBeta);
    expect(Object.keys(body)).toEqual(["jwe"]);
    expect(isEncryptedBody(body)).toBe(true);
    // Only a body whose one member is a compact JWE counts as encrypted.
    expect(isEncryptedBody({ ...body, note: "x" })).toBe(false);
    expect(isEncryptedBody({ jwe: "not a jwe" })).toBe(false);
    expect(isEncryptedBody({ text: body.jwe })).toBe(false);
    expect(isEncryptedBody(null)).toBe(false);
    expect(body.jwe).not.toContain("medical");
    expect(await decryptBody(body, beta, "agent-alpha")).toEqual(secret);
  });

  it("names algorithm, sender and recipient in the authenticated protected header", async () => {
    const { jwe } = await encryptBody(secret, toBeta);
    const header = JSON.parse(Buffer.from(jwe.split(".")[0] ?? "", "base64url").toString("utf8"));
    expect(header).toMatchObject({
      alg: "ECDH-ES",
      enc: "A256GCM",
      kid: betaKey.kid,
      "acp-from": "agent-alpha",
      "acp-to": "agent-beta",
    });
    expect(header.epk).toMatchObject({ kty: "OKP", crv: "X25519" });
  });

  it("is fresh each time (new ephemeral key and IV)", async () => {
    const [a, b] = await Promise.all([encryptBody(secret, toBeta), encryptBody(secret, toBeta)]);
    expect(a.jwe).not.toBe(b.jwe);
  });

  it("encrypt, then sign: the whole message verifies and the body decrypts after verification", async () => {
    const request = buildRequest(senderOf(alpha), "agent-beta", await encryptBody(secret, toBeta));
    const signed = signMessage(request, alphaSigner);
    const verified = verifyEnvelope(JSON.stringify(signed), { resolveKey: keyRing(alpha) });
    const body = ("params" in verified.message ? verified.message.params.body : {}) as { jwe: string };
    expect(await decryptBody(body, beta, verified.headers["agent-id"])).toEqual(secret);
  });

  it("an encrypted handoff validates as {jwe} only", async () => {
    const body = await encryptBody({ completed: "a", remaining: "b", context: {} }, toBeta);
    const handoff = { ...buildRequest(senderOf(alpha), "agent-beta", body), method: "agent.handoff" };
    handoff.params.headers["message-type"] = "handoff";
    expect(() => validateMessage(handoff)).not.toThrow();
  });

  it("another agent cannot decrypt a body encrypted to the recipient (-32009)", async () => {
    const body = await encryptBody(secret, toBeta);
    const err = await acpErrorOfAsync(() => decryptBody(body, gamma, "agent-alpha"));
    expect(err.code).toBe(ErrorCode.DecryptionFailed);
    expect(err.message).toMatch(/encrypted to agent-beta/);
    expect(err.data.problems?.[0]?.path).toBe("/params/body/jwe");
  });

  it("a body encrypted to beta's key but labelled for gamma does not decrypt with gamma's key", async () => {
    const body = await encryptBody(secret, { ...toBeta, recipientId: "agent-gamma" });
    const err = await acpErrorOfAsync(() => decryptBody(body, gamma, "agent-alpha"));
    expect(err.message).toMatch(/cannot be decrypted with this agent's encryption key/);
  });

  it("a JWE lifted into another sender's message is refused", async () => {
    const body = await encryptBody(secret, toBeta);
    // gamma copies alpha's encrypted body into a message gamma signs: the signer is not the encrypter.
    const err = await acpErrorOfAsync(() => decryptBody(body, beta, "agent-gamma"));
    expect(err.code).toBe(ErrorCode.DecryptionFailed);
    expect(err.message).toMatch(/encrypted by agent-alpha, not by the signer agent-gamma/);
  });

  it("a JWE whose protected header was rewritten to claim another sender fails authentication", async () => {
    const { jwe } = await encryptBody(secret, toBeta);
    const [head = "", ...rest] = jwe.split(".");
    const header = JSON.parse(Buffer.from(head, "base64url").toString("utf8"));
    const forgedHead = Buffer.from(JSON.stringify({ ...header, "acp-from": "agent-gamma" })).toString(
      "base64url",
    );
    const err = await acpErrorOfAsync(() =>
      decryptBody({ jwe: [forgedHead, ...rest].join(".") }, beta, "agent-gamma"),
    );
    expect(err.code).toBe(ErrorCode.DecryptionFailed);
  });

  it.each<[string, Uint8Array]>([
    ["not JSON", new TextEncoder().encode("plain text")],
    ["a JSON array", new TextEncoder().encode("[1,2]")],
  ])("a decrypted body that is %s is refused", async (_name, plaintext) => {
    const jwe = await new CompactEncrypt(plaintext)
      .setProtectedHeader({
        alg: "ECDH-ES",
        enc: "A256GCM",
        "acp-from": "agent-alpha",
        "acp-to": "agent-beta",
      })
      .encrypt(importPublicKey(betaKey));
    const err = await acpErrorOfAsync(() => decryptBody({ jwe }, beta, "agent-alpha"));
    expect(err.code).toBe(ErrorCode.DecryptionFailed);
    expect(err.message).toMatch(/not (JSON|a JSON object)/);
  });

  it("garbage instead of a JWE is refused", async () => {
    const err = await acpErrorOfAsync(() => decryptBody({ jwe: "a.b.c.d.e" }, beta, "agent-alpha"));
    expect(err.code).toBe(ErrorCode.DecryptionFailed);
  });
});
