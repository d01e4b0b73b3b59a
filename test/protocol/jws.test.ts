import { sign as edSign } from "node:crypto";
import fc from "fast-check";
import { FlattenedSign, flattenedVerify } from "jose";
import { describe, expect, it } from "vitest";
import {
  AcpError,
  buildRequest,
  canonicalize,
  createSigner,
  decodeProtectedHeader,
  ErrorCode,
  importPrivateKey,
  importPublicKey,
  jwkThumbprint,
  keyId,
  signingInput,
  signMessage,
  verifyMessageSignature,
  verifyMessageSignatureAsync,
} from "../../src/protocol/index.js";
import { signatureKeyId } from "../../src/protocol/jws.js";
import {
  acpErrorOf,
  alpha,
  alphaSigner,
  beta,
  betaSigner,
  fixedIdentity,
  keyRing,
  mutated,
  senderOf,
} from "./fixtures.js";

const ring = keyRing(alpha, beta);
const NOW = new Date("2026-02-14T14:30:00Z");
const request = (body: Record<string, unknown> = { action: "get-availability" }) =>
  buildRequest(senderOf(alpha), "agent-beta", body, { now: NOW, messageId: "msg-00000001" });

/** Replaces the protected header of a signature and signs the result with `identity`'s key. */
function signWithHeader<M extends object>(message: M, header: Record<string, unknown>, identity = alpha) {
  const protectedB64 = Buffer.from(JSON.stringify(header)).toString("base64url");
  const sig = edSign(null, signingInput(protectedB64, message), importPrivateKey(identity.signing));
  return { ...message, signature: `${protectedB64}..${sig.toString("base64url")}` };
}

describe("key ids", () => {
  it("computes the RFC 7638 thumbprint of RFC 8037's Ed25519 example key (appendix A.3)", () => {
    const jwk = { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" };
    expect(jwkThumbprint(jwk)).toBe("kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
  });

  it("names the agent and the key: <agent-id>#<thumbprint>", () => {
    expect(alphaSigner.kid).toBe(`agent-alpha#${jwkThumbprint(alpha.signing)}`);
    expect(keyId("agent-alpha", alpha.signing)).toBe(alphaSigner.kid);
  });

  it("derives the kid from the key even when the key file carries a different one", () => {
    const edited = { ...alpha, signing: { ...alpha.signing, kid: "agent-alpha#made-up" } };
    expect(createSigner(edited).kid).toBe(alphaSigner.kid);
  });

  it("the protected header is the JCS of {alg, kid}", () => {
    const header = Buffer.from(alphaSigner.protectedB64, "base64url").toString("utf8");
    expect(header).toBe(canonicalize({ alg: "EdDSA", kid: alphaSigner.kid }));
    expect(decodeProtectedHeader(alphaSigner.protectedB64)).toEqual({ alg: "EdDSA", kid: alphaSigner.kid });
  });
});

describe("signing", () => {
  it("produces a detached compact JWS over the JCS bytes of the message without its signature", () => {
    const message = request();
    const signed = signMessage(message, alphaSigner);
    const [protectedB64, empty, sig] = signed.signature.split(".");
    expect(protectedB64).toBe(alphaSigner.protectedB64);
    expect(empty).toBe("");
    expect(Buffer.from(sig ?? "", "base64url")).toHaveLength(64);
    const expectedInput = `${protectedB64}.${Buffer.from(canonicalize(message)).toString("base64url")}`;
    expect(signingInput(protectedB64 ?? "", signed).toString("ascii")).toBe(expectedInput);
    expect(message).not.toHaveProperty("signature");
  });

  it("is deterministic (Ed25519) and replaces an existing signature rather than signing it", () => {
    const once = signMessage(request(), alphaSigner);
    const twice = signMessage(once, alphaSigner);
    expect(twice.signature).toBe(once.signature);
  });
});

describe("verification failures", () => {
  const signed = signMessage(request(), alphaSigner);

  it("accepts the genuine message and returns the kid", () => {
    expect(verifyMessageSignature(signed, ring)).toBe(alphaSigner.kid);
  });

  it.each<[string, (m: typeof signed) => void]>([
    ["a changed body value", (m) => (m.params.body.action = "get-availabilitx")],
    ["an added body member", (m) => (m.params.body.extra = true)],
    ["a changed id", (m) => (m.id = "msg-00000002")],
    ["a changed timestamp", (m) => (m.params.headers.timestamp = "2026-02-14T14:30:01.000Z")],
    ["a changed recipient (re-routed)", (m) => (m.params.headers["recipient-id"] = "agent-gamma")],
    ["an added top-level member", (m) => Object.assign(m, { extra: 1 })],
  ])("%s breaks the signature (-32002)", (_name, change) => {
    const err = acpErrorOf(() => verifyMessageSignature(mutated(signed, change), ring));
    expect(err.code).toBe(ErrorCode.SignatureInvalid);
    expect(err.data.problems?.[0]?.path).toBe("/signature");
  });

  it("a __proto__ member smuggled into the message breaks the signature", () => {
    const text = JSON.stringify(signed).replace('"params":{', '"__proto__":{"x":1},"params":{');
    const err = acpErrorOf(() => verifyMessageSignature(JSON.parse(text), ring));
    expect(err.code).toBe(ErrorCode.SignatureInvalid);
  });

  it("a random signature of the right length (-32002)", () => {
    const forged = `${alphaSigner.protectedB64}..${Buffer.alloc(64, 7).toString("base64url")}`;
    expect(acpErrorOf(() => verifyMessageSignature({ ...signed, signature: forged }, ring))).toMatchObject({
      code: ErrorCode.SignatureInvalid,
      message: "the signature does not match the message (tampered, re-routed, or signed by another key)",
    });
  });

  it("a signature that is not 64 bytes, or not in its one canonical base64url form (-32002)", () => {
    const [head, , sig = ""] = signed.signature.split(".");
    const short = `${head}..${sig.slice(0, 40)}`;
    // 64 bytes leave 4 unused low bits in the last of 86 characters; set one: same bytes, other text.
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = alphabet.indexOf(sig.at(-1) ?? "A");
    const variant = `${head}..${sig.slice(0, -1)}${alphabet[last ^ 1]}`;
    expect(Buffer.from(variant.split("..")[1] ?? "", "base64url")).toEqual(Buffer.from(sig, "base64url"));
    for (const signature of [short, variant]) {
      const err = acpErrorOf(() => verifyMessageSignature({ ...signed, signature }, ring));
      expect(err.code).toBe(ErrorCode.SignatureInvalid);
      expect(err.message).toMatch(/64 base64url-encoded bytes/);
    }
  });

  it("the wrong key: signed by another key under the registered kid (-32002)", () => {
    const other = fixedIdentity("agent-alpha", "principal-a", "alpha-second-key");
    const forged = signWithHeader(request(), { alg: "EdDSA", kid: alphaSigner.kid }, other);
    expect(acpErrorOf(() => verifyMessageSignature(forged, ring)).code).toBe(ErrorCode.SignatureInvalid);
  });

  it("an unregistered key of the right agent is an unknown key (-32003)", () => {
    const other = fixedIdentity("agent-alpha", "principal-a", "alpha-second-key");
    const err = acpErrorOf(() => verifyMessageSignature(signMessage(request(), createSigner(other)), ring));
    const kid = keyId("agent-alpha", other.signing);
    expect(err).toMatchObject({
      code: ErrorCode.UnknownKey,
      message: `no registered public key ${kid}`,
      data: {
        kid,
        problems: [{ path: "/signature", message: `key ${kid} is not registered for agent-alpha` }],
      },
    });
  });

  it("a kid of another agent than the agent-id header (-32002), even with that agent's valid key", () => {
    const err = acpErrorOf(() => verifyMessageSignature(signMessage(request(), betaSigner), ring));
    expect(err.code).toBe(ErrorCode.SignatureInvalid);
    expect(err.message).toMatch(/does not belong to agent-id agent-alpha/);
  });

  it("the asynchronous verify (thread pool) gives the same answers as the synchronous one", async () => {
    const other = fixedIdentity("agent-alpha", "principal-a", "alpha-second-key");
    const cases = [
      signed,
      mutated(signed, (m) => (m.params.body.action = "changed")),
      { ...signed, signature: `${alphaSigner.protectedB64}..${Buffer.alloc(64, 7).toString("base64url")}` },
      signMessage(request(), createSigner(other)),
      signMessage(request(), betaSigner),
      { ...signed, signature: undefined },
    ];
    const outcome = async (run: () => string | Promise<string>) => {
      try {
        return { kid: await run() };
      } catch (err) {
        return { code: (err as AcpError).code, message: (err as AcpError).message };
      }
    };
    const answers = [];
    for (const message of cases) {
      const sync = await outcome(() => verifyMessageSignature(message as typeof signed, ring));
      expect(await outcome(() => verifyMessageSignatureAsync(message as typeof signed, ring))).toEqual(sync);
      answers.push(sync.code ?? sync.kid);
    }
    expect(answers).toEqual([
      alphaSigner.kid,
      ErrorCode.SignatureInvalid,
      ErrorCode.SignatureInvalid,
      ErrorCode.UnknownKey,
      ErrorCode.SignatureInvalid,
      ErrorCode.SignatureMissing,
    ]);
  });

  it.each(["ES256", "HS256", "none", "Ed25519"])("alg %s instead of EdDSA (-32002)", (alg) => {
    const err = acpErrorOf(() =>
      verifyMessageSignature(signWithHeader(request(), { alg, kid: alphaSigner.kid }), ring),
    );
    expect(err.code).toBe(ErrorCode.SignatureInvalid);
    expect(err.message).toMatch(/alg/);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ["no kid", { alg: "EdDSA" }, "the JWS protected header has no kid"],
    ["an empty kid", { alg: "EdDSA", kid: "" }, "the JWS protected header has no kid"],
    [
      "a crit extension",
      { alg: "EdDSA", kid: "agent-alpha#x", crit: ["exp"], exp: 1 },
      "the JWS protected header has crit extensions ACP does not define",
    ],
  ])("a protected header with %s (-32002)", (_name, header, message) => {
    const err = acpErrorOf(() => verifyMessageSignature(signWithHeader(request(), header), ring));
    expect(err).toMatchObject({ code: ErrorCode.SignatureInvalid, message });
  });

  const notJws = "the signature is not a detached compact JWS (header..signature)";
  it.each([
    ["not-base64-json..AAAA", "the JWS protected header is not base64url JSON"],
    ["..AAAA", notJws],
    ["abc.def.ghi", notJws],
    ["no separator", notJws],
    [`${alphaSigner.protectedB64}..AAAA.BBBB`, notJws],
  ])("a malformed JWS %j (-32002)", (sig, message) => {
    const err = acpErrorOf(() => verifyMessageSignature({ ...signed, signature: sig }, ring));
    expect(err).toMatchObject({
      code: ErrorCode.SignatureInvalid,
      message,
      data: { problems: [{ path: "/signature", message }] },
    });
  });

  it("names the signing key without verifying (the relay's check of a signature made in process)", () => {
    expect(signatureKeyId(mutated(signed, (m) => (m.params.body.action = "changed")))).toBe(alphaSigner.kid);
    const { signature: _s, ...unsigned } = signed;
    for (const message of [
      unsigned,
      { ...signed, signature: "..AAAA" },
      { ...signed, signature: "no separator" },
    ])
      expect(acpErrorOf(() => signatureKeyId(message as typeof signed))).toMatchObject({
        code: ErrorCode.SignatureInvalid,
        message: notJws,
      });
  });

  it("no signature at all (-32001)", () => {
    const { signature: _s, ...unsigned } = signed;
    expect(acpErrorOf(() => verifyMessageSignature(unsigned, ring))).toMatchObject({
      code: ErrorCode.SignatureMissing,
      message: "the message carries no signature",
      data: { problems: [{ path: "/signature", message: "every message must be signed" }] },
    });
  });

  it("a received value JCS cannot represent is invalid params, not an internal error", () => {
    const withInfinity = JSON.parse(JSON.stringify(signed).replace('"get-availability"', "1e400"));
    const err = acpErrorOf(() => verifyMessageSignature(withInfinity, ring));
    expect(err.code).toBe(ErrorCode.InvalidParams);
    expect(err.message).toMatch(/^the message cannot be canonicalized: /);
    expect(err.data.problems?.[0]?.path).toBe("/params/body/action");
  });
});

describe("round trips (fast-check)", () => {
  const body = fc.dictionary(fc.string({ minLength: 1 }), fc.jsonValue(), { maxKeys: 8 });

  it("every signed message verifies, also after a trip through JSON text", () => {
    fc.assert(
      fc.property(body, (b) => {
        const signed = signMessage(request(b), alphaSigner);
        expect(verifyMessageSignature(signed, ring)).toBe(alphaSigner.kid);
        expect(verifyMessageSignature(JSON.parse(JSON.stringify(signed)), ring)).toBe(alphaSigner.kid);
      }),
      { numRuns: 200 },
    );
  });

  it("member order on the wire does not matter; any change to the body does", () => {
    fc.assert(
      fc.property(body, fc.string({ minLength: 1 }), (b, key) => {
        const signed = signMessage(request(b), alphaSigner);
        const { signature, id, ...rest } = signed;
        const reordered = JSON.parse(JSON.stringify({ signature, id, ...rest }));
        reordered.params = { body: reordered.params.body, headers: reordered.params.headers };
        expect(verifyMessageSignature(reordered, ring)).toBe(alphaSigner.kid);
        const changed = mutated(signed, (m) => {
          // defineProperty: the key may be "__proto__", which plain assignment would not add as a member.
          const value = Object.hasOwn(b, key) ? [m.params.body[key]] : "added";
          Object.defineProperty(m.params.body, key, { value, enumerable: true });
        });
        expect(() => verifyMessageSignature(changed, ring)).toThrow(AcpError);
      }),
      { numRuns: 200 },
    );
  });
});

describe("interoperability with jose (RFC 7515)", () => {
  const message = request({ action: "get-availability", parameters: { duration_minutes: 60, note: "€ ✓" } });
  const signed = signMessage(message, alphaSigner);
  const [protectedB64 = "", , signature = ""] = signed.signature.split(".");
  const payload = Buffer.from(canonicalize(message)).toString("base64url");

  it("jose's flattenedVerify accepts our detached JWS with the JCS bytes as payload", async () => {
    const result = await flattenedVerify(
      { protected: protectedB64, payload, signature },
      importPublicKey(alpha.signing),
      {
        algorithms: ["EdDSA"],
      },
    );
    expect(result.protectedHeader).toEqual({ alg: "EdDSA", kid: alphaSigner.kid });
    expect(Buffer.from(result.payload).toString("utf8")).toBe(canonicalize(message));
  });

  it("jose's flattenedVerify refuses it with the wrong key", async () => {
    await expect(
      flattenedVerify({ protected: protectedB64, payload, signature }, importPublicKey(beta.signing)),
    ).rejects.toThrow();
  });

  it("jose's FlattenedSign over the same input yields the identical signature, which we verify", async () => {
    const jws = await new FlattenedSign(Buffer.from(canonicalize(message)))
      .setProtectedHeader({ alg: "EdDSA", kid: alphaSigner.kid })
      .sign(importPrivateKey(alpha.signing));
    expect(jws.protected).toBe(protectedB64);
    expect(jws.signature).toBe(signature);
    const theirs = { ...message, signature: `${jws.protected}..${jws.signature}` };
    expect(verifyMessageSignature(theirs, ring)).toBe(alphaSigner.kid);
  });
});
