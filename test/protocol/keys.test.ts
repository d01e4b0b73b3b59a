import { createPrivateKey, createPublicKey, diffieHellman, sign, verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Ed25519PrivateJwk, generatePrivateJwk, X25519PrivateJwk } from "../../src/protocol/index.js";
import { privateJwkOf } from "../../src/protocol/keys.js";

const hex = (text: string) => Buffer.from(text, "hex");
const b64url = (text: string) => hex(text).toString("base64url");

describe("fresh private keys", () => {
  it.each([
    {
      vector: "an Ed25519 key from its seed has RFC 8032's public key (test 1)",
      curve: "ed25519",
      crv: "Ed25519",
      secret: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
      publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    },
    {
      vector: "an X25519 key from its scalar has RFC 7748's public key (section 6.1, Alice)",
      curve: "x25519",
      crv: "X25519",
      secret: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
      publicKey: "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
    },
  ] as const)("$vector", ({ curve, crv, secret, publicKey }) => {
    expect(privateJwkOf(curve, hex(secret))).toEqual({
      kty: "OKP",
      crv,
      d: b64url(secret),
      x: b64url(publicKey),
    });
  });

  it("refuses a private key that is not 32 bytes", () => {
    expect(() => privateJwkOf("ed25519", new Uint8Array(31))).toThrow(
      "a ed25519 private key is 32 bytes, not 31",
    );
  });

  it("generates keys that parse, sign and agree, each one new", () => {
    const signing = Ed25519PrivateJwk.parse(generatePrivateJwk("ed25519"));
    const key = createPrivateKey({ key: signing, format: "jwk" });
    const signature = sign(null, Buffer.from("hello"), key);
    const publicKey = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: signing.x }, format: "jwk" });
    expect(verify(null, Buffer.from("hello"), publicKey, signature)).toBe(true);
    expect(generatePrivateJwk("ed25519").d).not.toBe(signing.d);

    const a = X25519PrivateJwk.parse(generatePrivateJwk("x25519"));
    const b = X25519PrivateJwk.parse(generatePrivateJwk("x25519"));
    const secret = (own: typeof a, other: typeof a) =>
      diffieHellman({
        privateKey: createPrivateKey({ key: own, format: "jwk" }),
        publicKey: createPublicKey({ key: { kty: "OKP", crv: "X25519", x: other.x }, format: "jwk" }),
      });
    expect(secret(a, b).equals(secret(b, a))).toBe(true);
  });
});
