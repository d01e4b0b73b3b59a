import { readFileSync, writeFileSync } from "node:fs";
import { flattenedVerify } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import {
  AcpError,
  canonicalize,
  createSigner,
  decryptBody,
  importPublicKey,
  jwkThumbprint,
  type KeyResolver,
  keyId,
  PrivateIdentity,
  parseMessageText,
  ReplayGuard,
  signingInput,
  signMessage,
  validateMessage,
  verifyEnvelope,
} from "../../src/protocol/index.js";
import { generateVectors, type VectorFiles } from "./generate.js";

const NAMES = ["keys", "signatures", "invalid", "e2e"] as const;
const fileOf = (name: string) => new URL(`./${name}.json`, import.meta.url);

if (process.env.ACP_REGENERATE_VECTORS === "1") {
  const vectors = await generateVectors();
  for (const name of NAMES) writeFileSync(fileOf(name), `${JSON.stringify(vectors[name], null, 2)}\n`);
}

interface KeyEntry {
  name: string;
  identity: unknown;
  signingThumbprint: string;
  kid: string;
}
interface SignatureCase {
  name: string;
  key: string;
  message: Record<string, unknown>;
  canonical: string;
  canonicalUtf8Hex: string;
  protectedHeader: string;
  protectedB64: string;
  payloadB64: string;
  signingInput: string;
  signatureB64: string;
  signature: string;
  envelope: Record<string, unknown> & { signature: string };
}
interface InvalidCase {
  name: string;
  text?: string;
  message?: unknown;
  envelope?: boolean;
  verify?: { keys: string[]; now: string; skewMs: number; expectedRecipient?: string; deliveries?: number };
  expect: { code: number; paths: string[] };
}
interface StoredVectors {
  keys: { keys: KeyEntry[] };
  signatures: { cases: SignatureCase[] };
  invalid: { cases: InvalidCase[] };
  e2e: { sender: string; recipient: string; plaintext: unknown; body: { jwe: string }; envelope: unknown };
}

/** The stored vectors, read as another implementation would read them. */
const stored = Object.fromEntries(
  NAMES.map((name) => [name, JSON.parse(readFileSync(fileOf(name), "utf8"))]),
) as unknown as StoredVectors;
const keys = new Map<string, PrivateIdentity>(
  stored.keys.keys.map((entry) => [entry.name, PrivateIdentity.parse(entry.identity)]),
);
const identity = (name: string) => keys.get(name) ?? expect.unreachable(`no key ${name} in keys.json`);

/** A registry holding the named keys of keys.json. */
function registry(names: string[]): KeyResolver {
  const known = new Map(
    names.map((name) => [createSigner(identity(name)).kid, importPublicKey(identity(name).signing)]),
  );
  return (_agentId, kid) => known.get(kid);
}

describe("test vectors", () => {
  let generated: VectorFiles;
  beforeAll(async () => {
    generated = await generateVectors();
  });

  it.each(NAMES)("the code still produces %s.json exactly", (name) => {
    expect(generated[name]).toEqual((stored as unknown as VectorFiles)[name]);
  });

  it.each(stored.keys.keys.map((k) => [k.name, k] as const))("key %s: thumbprint and kid", (_n, entry) => {
    const id = identity(entry.name);
    expect(jwkThumbprint(id.signing)).toBe(entry.signingThumbprint);
    expect(keyId(id.agentId, id.signing)).toBe(entry.kid);
  });

  describe.each(stored.signatures.cases.map((c) => [c.name, c] as const))("signature case %s", (_n, c) => {
    it("canonical bytes, signing input and signature are reproduced", () => {
      expect(canonicalize(c.message)).toBe(c.canonical);
      expect(Buffer.from(c.canonical).toString("hex")).toBe(c.canonicalUtf8Hex);
      const signer = createSigner(identity(c.key));
      expect(c.protectedHeader).toBe(canonicalize({ alg: "EdDSA", kid: signer.kid }));
      expect(Buffer.from(c.protectedHeader).toString("base64url")).toBe(c.protectedB64);
      expect(Buffer.from(c.canonical).toString("base64url")).toBe(c.payloadB64);
      expect(signingInput(c.protectedB64, c.message).toString("ascii")).toBe(c.signingInput);
      expect(`${c.protectedB64}.${c.payloadB64}`).toBe(c.signingInput);
      expect(signMessage(c.message, signer)).toEqual(c.envelope);
      expect(c.envelope.signature).toBe(`${c.protectedB64}..${c.signatureB64}`);
    });

    it("the envelope passes the receive pipeline and an independent JWS verifier (jose)", async () => {
      // No replay window here: some of these keep the core protocol's example timestamps (invalid.json covers freshness).
      expect(verifyEnvelope(JSON.stringify(c.envelope), { resolveKey: registry([c.key]) }).kid).toBe(
        createSigner(identity(c.key)).kid,
      );
      const verified = await flattenedVerify(
        { protected: c.protectedB64, payload: c.payloadB64, signature: c.signatureB64 },
        importPublicKey(identity(c.key).signing),
      );
      expect(Buffer.from(verified.payload).toString("utf8")).toBe(c.canonical);
    });
  });

  it.each(stored.invalid.cases.map((c) => [c.name, c] as const))(
    "invalid case %s is refused as documented",
    (_n, c) => {
      let refused: unknown;
      try {
        if (c.text !== undefined) validateMessage(parseMessageText(c.text));
        else if (!c.verify) validateMessage(c.message, { envelope: c.envelope === true });
        else {
          const { now, skewMs, keys: registered, expectedRecipient, deliveries } = c.verify;
          const options = {
            resolveKey: registry(registered),
            replay: new ReplayGuard({ now: () => Date.parse(now), skewMs }),
            ...(expectedRecipient ? { expectedRecipient } : {}),
          };
          for (let i = 1; i < (deliveries ?? 1); i++) verifyEnvelope(structuredClone(c.message), options);
          verifyEnvelope(JSON.stringify(c.message), options);
        }
      } catch (err) {
        refused = err;
      }
      expect(refused, "the message was accepted").toBeInstanceOf(AcpError);
      const err = refused as AcpError;
      expect(err.code).toBe(c.expect.code);
      const paths = (err.data.problems ?? []).map((p) => p.path);
      for (const path of c.expect.paths) expect(paths).toContain(path);
    },
  );

  it("the end-to-end vector verifies, then decrypts to its plaintext with the recipient's key", async () => {
    const e2e = stored.e2e;
    const verified = verifyEnvelope(e2e.envelope, { resolveKey: registry([e2e.sender]) });
    expect("params" in verified.message && verified.message.params.body).toEqual(e2e.body);
    expect(await decryptBody(e2e.body, identity(e2e.recipient), verified.headers["agent-id"])).toEqual(
      e2e.plaintext,
    );
  });
});
