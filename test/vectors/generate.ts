/**
 * Generates ACP's test vectors, `test/vectors/*.json`, for this and other implementations:
 *   keys.json        fixed Ed25519/X25519 key pairs (JWK), their RFC 7638 thumbprints and key ids
 *   signatures.json  messages, their JCS bytes, the signing input, and the expected signatures
 *   invalid.json     messages that must be refused, with the expected error code and JSON pointers
 *   e2e.json         an end-to-end encrypted body with its recipient key and plaintext
 *
 * The keys come from fixed seeds and Ed25519 is deterministic, so every run produces the same files;
 * `test/vectors/vectors.test.ts` fails when the code drifts from them. The expected outcomes of the
 * invalid messages are written here by hand from docs/protocol.md, never computed by the code under
 * test. Regenerate (only after a deliberate, documented protocol change):
 *   ACP_REGENERATE_VECTORS=1 npx vitest run test/vectors
 */
import { createPublicKey, sign as edSign, webcrypto } from "node:crypto";
import { CompactEncrypt } from "jose";
import {
  AcpError,
  buildErrorResponse,
  buildNotification,
  buildRequest,
  buildResponse,
  canonicalize,
  createSigner,
  importPrivateKey,
  jwkThumbprint,
  publicIdentity,
  signingInput,
  signMessage,
} from "../../src/protocol/index.js";
import {
  fixedIdentity,
  sampleHandoff,
  exampleAnnounce,
  exampleRequest,
  exampleResponse,
} from "../protocol/fixtures.js";

type Json = Record<string, unknown>;

/** The clock of every verification vector, and the send time of its messages. */
export const VECTOR_NOW = "2026-02-14T14:30:30Z";
const SENT = new Date("2026-02-14T14:30:00Z");

const identities = {
  "agent-alpha": fixedIdentity("agent-alpha", "principal-a"),
  "agent-beta": fixedIdentity("agent-beta", "principal-b"),
  // A second key of agent-alpha that no registry knows: signatures by it are "unknown key".
  "agent-alpha/unregistered": fixedIdentity("agent-alpha", "principal-a", "agent-alpha/unregistered"),
};
type KeyName = keyof typeof identities;
const alpha = identities["agent-alpha"];
const beta = identities["agent-beta"];
const alphaSender = { agentId: alpha.agentId, principalId: alpha.principalId, layers: [0, 1, 2, 3] };
const betaSender = { agentId: beta.agentId, principalId: beta.principalId, layers: [0, 1, 2] };

function keysVector() {
  return {
    description:
      "Fixed key pairs. kid = <agent-id>#<RFC 7638 thumbprint of the Ed25519 key>. NEVER use these keys outside tests.",
    keys: Object.entries(identities).map(([name, identity]) => ({
      name,
      identity,
      public: publicIdentity(identity),
      signingThumbprint: jwkThumbprint(identity.signing),
      kid: createSigner(identity).kid,
    })),
  };
}

/** Every intermediate of signing `message` with `key`, for implementers to compare step by step. */
function signatureCase(name: string, key: KeyName, message: Json, note: string) {
  const signer = createSigner(identities[key]);
  const canonical = canonicalize(message);
  const input = signingInput(signer.protectedB64, message);
  const signed = signMessage(message, signer);
  return {
    name,
    note,
    key,
    message,
    canonical,
    canonicalUtf8Hex: Buffer.from(canonical).toString("hex"),
    protectedHeader: Buffer.from(signer.protectedB64, "base64url").toString("utf8"),
    protectedB64: signer.protectedB64,
    payloadB64: Buffer.from(canonical).toString("base64url"),
    signingInput: input.toString("ascii"),
    signatureB64: signed.signature.split("..")[1],
    signature: signed.signature,
    envelope: signed,
  };
}

const routed = <M extends { params: { headers: Json } }>(message: M, messageId: string, to: string): M => {
  const copy = structuredClone(message);
  copy.params.headers["message-id"] = messageId;
  copy.params.headers["recipient-id"] = to;
  return copy;
};

function signaturesVector() {
  const request = buildRequest(alphaSender, "agent-beta", exampleRequest().params.body, {
    now: SENT,
    messageId: "req-7f3a-4b2c-9d1e",
  });
  const response = buildResponse(betaSender, request, exampleResponse().result.body, {
    now: new Date(SENT.getTime() + 5000),
    messageId: "resp-5c1d-4e2f-8a9b",
  });
  const announce = routed(exampleAnnounce(), "ann-1a2b-3c4d-5e6f", "agent-beta");
  const handoff = routed(sampleHandoff(), "handoff-0001", "agent-beta");
  const notification = buildNotification(
    alphaSender,
    "agent-beta",
    {
      status: "calendar synced",
      "\u20ac": "euro",
      "\r": "cr",
      "1": "index-like key",
      price: 1e21,
      ratio: 0.1,
    },
    { now: SENT, messageId: "note-0a1b-2c3d-4e5f" },
  );
  const summarized = buildRequest(alphaSender, "agent-beta", exampleRequest().params.body, {
    now: SENT,
    messageId: "req-8a4b-5c3d-0e2f",
  });
  summarized.params.headers.summary = "Asked agent-beta for free hour-long slots next week";
  const error = buildErrorResponse(
    betaSender,
    request,
    new AcpError("CapabilityMissing", "agent-beta has no calendar-write capability"),
    { now: SENT, messageId: "err-9e8d-7c6b-5a4f" },
  );
  return {
    description:
      "signature = protectedB64 + '..' + signatureB64; signingInput = protectedB64 + '.' + payloadB64; " +
      "payloadB64 = BASE64URL(UTF-8(canonical)); canonical = RFC 8785 JCS of the message without 'signature'.",
    cases: [
      signatureCase(
        "request",
        "agent-alpha",
        request,
        "the core protocol's example request, routed to agent-beta",
      ),
      signatureCase(
        "response",
        "agent-beta",
        response,
        "the core protocol's example response; id = the request's id",
      ),
      signatureCase(
        "announce",
        "agent-alpha",
        announce,
        "the core protocol's example announce with routing headers",
      ),
      signatureCase("handoff", "agent-alpha", handoff, "completed, remaining and context"),
      signatureCase(
        "notification-jcs",
        "agent-alpha",
        notification,
        "no id; keys needing UTF-16 ordering and numbers needing ECMAScript formatting",
      ),
      signatureCase(
        "error-response",
        "agent-beta",
        error,
        "a signed agent error: headers in error.data.headers",
      ),
      signatureCase(
        "request-with-summary",
        "agent-alpha",
        summarized,
        "the sender's own summary in the optional summary header, signed with the rest",
      ),
    ],
  };
}

/** Signs with `key`'s private key but lets the protected header say anything. */
function signWithHeader(message: Json, header: Json, key: KeyName) {
  const protectedB64 = Buffer.from(canonicalize(header)).toString("base64url");
  const sig = edSign(null, signingInput(protectedB64, message), importPrivateKey(identities[key].signing));
  return { ...message, signature: `${protectedB64}..${sig.toString("base64url")}` };
}

function invalidVector() {
  const plain = exampleRequest();
  const request = (id: string, at = SENT) =>
    buildRequest(alphaSender, "agent-beta", plain.params.body, { now: at, messageId: id });
  const signed = <M extends object>(message: M, key: KeyName = "agent-alpha") =>
    signMessage(message, createSigner(identities[key]));
  const change = <T>(message: T, edit: (copy: T) => void): T => {
    const copy = structuredClone(message);
    edit(copy);
    return copy;
  };
  const withoutHeader = (name: string) => change(plain, (m) => delete m.params.headers[name]);
  const withHeader = (name: string, value: unknown) => change(plain, (m) => (m.params.headers[name] = value));
  const genuine = signed(request("req-0000-0000-0001"));
  const verify = { keys: ["agent-alpha", "agent-beta"], now: VECTOR_NOW, skewMs: 300_000 };

  const cases: Json[] = [
    { name: "not-json", text: '{"jsonrpc":"2.0",', expect: { code: -32700, paths: [""] } },
    { name: "not-an-object", message: [plain], expect: { code: -32600, paths: [""] } },
    {
      name: "jsonrpc-not-2.0",
      message: { ...plain, jsonrpc: "1.0" },
      expect: { code: -32600, paths: ["/jsonrpc"] },
    },
    ...[
      "agent-id",
      "principal-id",
      "timestamp",
      "message-type",
      "trust-layer-version",
      "skill-layers-loaded",
    ].map((name) => ({
      name: `missing-${name}`,
      message: withoutHeader(name),
      expect: { code: -32602, paths: [`/params/headers/${name}`] },
    })),
    ...(
      [
        ["agent-id", 42, ""],
        ["principal-id", "", ""],
        ["timestamp", "2026-02-14", ""],
        ["message-type", "query", ""],
        ["trust-layer-version", "1.0", ""],
        ["skill-layers-loaded", [0, -1], "/1"],
        ["summary", "", ""],
      ] as const
    ).map(([name, value, suffix]) => ({
      name: `malformed-${name}`,
      message: withHeader(name, value),
      expect: { code: -32602, paths: [`/params/headers/${name}${suffix}`] },
    })),
    {
      name: "notification-with-id",
      message: { ...exampleAnnounce(), id: "ann-1" },
      expect: { code: -32600, paths: ["/id"] },
    },
    {
      name: "request-without-id",
      message: change(plain as Json, (m) => delete m.id),
      expect: { code: -32600, paths: ["/id"] },
    },
    {
      name: "response-without-id",
      message: change(exampleResponse() as Json, (m) => delete m.id),
      expect: { code: -32600, paths: ["/id"] },
    },
    ...["completed", "remaining", "context"].map((part) => ({
      name: `handoff-without-${part}`,
      message: change(sampleHandoff(), (m) => delete m.params.body[part]),
      expect: { code: -32602, paths: [`/params/body/${part}`] },
    })),
    {
      name: "message-type-contradicts-method",
      message: withHeader("message-type", "notification"),
      expect: { code: -32602, paths: ["/params/headers/message-type"] },
    },
    {
      name: "envelope-without-signature",
      envelope: true,
      message: request("req-0000-0000-0002"),
      expect: { code: -32001, paths: ["/signature"] },
    },
    {
      name: "envelope-without-routing-headers",
      envelope: true,
      message: signed(plain),
      expect: { code: -32602, paths: ["/params/headers/message-id", "/params/headers/recipient-id"] },
    },
    {
      name: "tampered-body",
      verify,
      message: change(genuine, (m) => (m.params.body.action = "get-availabilitz")),
      expect: { code: -32002, paths: ["/signature"] },
    },
    {
      name: "re-routed",
      verify: { ...verify, expectedRecipient: "agent-gamma" },
      message: change(genuine, (m) => (m.params.headers["recipient-id"] = "agent-gamma")),
      expect: { code: -32002, paths: ["/signature"] },
    },
    {
      name: "wrong-key-under-registered-kid",
      verify,
      message: signWithHeader(
        request("req-0000-0000-0003"),
        { alg: "EdDSA", kid: createSigner(alpha).kid },
        "agent-beta",
      ),
      expect: { code: -32002, paths: ["/signature"] },
    },
    {
      name: "kid-of-another-agent",
      verify,
      message: signed(request("req-0000-0000-0004"), "agent-beta"),
      expect: { code: -32002, paths: ["/signature"] },
    },
    {
      name: "unknown-key",
      verify,
      message: signed(request("req-0000-0000-0005"), "agent-alpha/unregistered"),
      expect: { code: -32003, paths: ["/signature"] },
    },
    {
      name: "alg-not-EdDSA",
      verify,
      message: signWithHeader(
        request("req-0000-0000-0006"),
        { alg: "ES256", kid: createSigner(alpha).kid },
        "agent-alpha",
      ),
      expect: { code: -32002, paths: ["/signature"] },
    },
    {
      name: "replayed",
      verify: { ...verify, deliveries: 2 },
      message: genuine,
      expect: { code: -32005, paths: ["/params/headers/message-id"] },
    },
    {
      name: "stale-timestamp",
      verify,
      message: signed(request("req-0000-0000-0007", new Date(SENT.getTime() - 6 * 60_000))),
      expect: { code: -32006, paths: ["/params/headers/timestamp"] },
    },
    {
      name: "future-timestamp",
      verify,
      message: signed(request("req-0000-0000-0008", new Date(SENT.getTime() + 6 * 60_000))),
      expect: { code: -32006, paths: ["/params/headers/timestamp"] },
    },
    {
      name: "misrouted",
      verify: { ...verify, expectedRecipient: "agent-gamma" },
      message: genuine,
      expect: { code: -32007, paths: ["/params/headers/recipient-id"] },
    },
  ];
  return {
    description:
      "Each case must be refused with expect.code, listing a problem at each of expect.paths (JSON pointers). " +
      "'text' is raw wire text; 'envelope' asks for the relayed-envelope rules; 'verify' runs the full receive " +
      "pipeline with the named keys registered, the clock at 'now', an optional expected recipient, and " +
      "'deliveries' copies of the message (the last one is the one refused).",
    cases,
  };
}

/** A deterministic JWE (fixed ephemeral key and IV), built exactly as encryptBody builds one. */
async function e2eVector() {
  const ephemeral = await webcrypto.subtle.importKey(
    "pkcs8",
    Buffer.concat([Buffer.from("302e020100300506032b656e04220420", "hex"), Buffer.alloc(32, 0x5a)]),
    { name: "X25519" },
    true, // jose reads the ephemeral public key out of it
    ["deriveBits"],
  );
  const plaintext = { action: "share-notes", parameters: { text: "confidential: principal-a's diagnosis" } };
  const recipient = publicIdentity(beta).encryption!;
  const jwe = await new CompactEncrypt(new TextEncoder().encode(JSON.stringify(plaintext)))
    .setProtectedHeader({
      alg: "ECDH-ES",
      enc: "A256GCM",
      kid: recipient.kid,
      "acp-from": alpha.agentId,
      "acp-to": beta.agentId,
    })
    .setKeyManagementParameters({ epk: ephemeral })
    .setInitializationVector(Buffer.alloc(12, 0x24))
    .encrypt(createPublicKey({ key: { ...recipient }, format: "jwk" }));
  const request = buildRequest(
    alphaSender,
    "agent-beta",
    { jwe },
    { now: SENT, messageId: "req-e2e-0000-0001" },
  );
  return {
    description:
      "JWE compact, alg ECDH-ES (X25519), enc A256GCM; decrypt with the recipient key of keys.json " +
      "(agent-beta encryption.d) after verifying the signature; acp-from must equal the signer.",
    sender: "agent-alpha",
    recipient: "agent-beta",
    plaintext,
    body: { jwe },
    envelope: signMessage(request, createSigner(alpha)),
  };
}

export type VectorFiles = Record<"keys" | "signatures" | "invalid" | "e2e", Json>;

export async function generateVectors(): Promise<VectorFiles> {
  return {
    keys: keysVector(),
    signatures: signaturesVector(),
    invalid: invalidVector(),
    e2e: await e2eVector(),
  };
}
