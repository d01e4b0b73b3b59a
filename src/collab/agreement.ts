import { sign as edSign, verify as edVerify } from "node:crypto";
import { z } from "zod";
import {
  AgentRef,
  agentOfKeyId,
  decodeProtectedHeader,
  DetachedJws,
  Ed25519PublicJwk,
  importPublicKey,
  keyId,
  localPartOf,
  PrincipalId,
  problemsOf,
  type PublicIdentity,
  type Signer,
  signingInput,
} from "../protocol/index.js";
import { CollabId, canonicalHash, JsonObject } from "./util.js";

/**
 * Agreements. Every offer in a negotiation carries the offerer's signature over the agreement that
 * would result if the other side accepted it; accepting adds the acceptor's signature over the same
 * document. The result is one document signed by both parties' Ed25519 keys, each signature a
 * detached compact JWS over the RFC 8785 canonical bytes (the construction ACP messages use), so it
 * can be checked offline with nothing but the two public keys.
 */
export const AgreementParty = z.strictObject({
  /** Its id, or its address (`agent-id@domain`) when the parties are agents of different domains. */
  agentId: AgentRef,
  principalId: PrincipalId,
  /** The party's public signing key; the signature's kid is `<agent id>#<its thumbprint>` (the id without domain). */
  signing: Ed25519PublicJwk.omit({ kid: true }).strict(),
});
export type AgreementParty = z.infer<typeof AgreementParty>;

export const AgreementDocument = z.strictObject({
  type: z.literal("acp.agreement"),
  version: z.literal(1),
  sessionId: CollabId,
  subject: z.string().max(500).optional(),
  /** The proposer first, then the responder. */
  parties: z.tuple([AgreementParty, AgreementParty]),
  /** The final terms: the accepted offer. */
  terms: JsonObject,
  /** The round of the accepted offer (1 = the initial proposal). */
  round: z.int().positive(),
  /** Hash chain over every round up to the accepted one (see `roundHash`). */
  historyHash: z.string().regex(/^[A-Za-z0-9_-]{43}$/, "must be a base64url SHA-256"),
  offeredBy: AgentRef,
  offeredAt: z.iso.datetime({ offset: true }),
});
export type AgreementDocument = z.infer<typeof AgreementDocument>;

export const AgreementSignature = z.strictObject({ kid: z.string().min(1), signature: DetachedJws });

export const SignedAgreement = z.strictObject({
  document: AgreementDocument,
  signatures: z.array(AgreementSignature).length(2, "must hold both parties' signatures"),
});
export type SignedAgreement = z.infer<typeof SignedAgreement>;

/** One round of a negotiation as it enters the history hash chain. */
export interface RoundEntry {
  round: number;
  by: string;
  terms: Record<string, unknown>;
  messageId: string;
  at: string;
}

/** hash(n) = SHA-256(JCS({prev: hash(n-1) or null, ...round n})): changing any round changes every later hash. */
export function roundHash(prev: string | null, entry: RoundEntry): string {
  return canonicalHash({ prev, ...entry });
}

/** The party record of a registered agent (public key members only, so both sides build the same bytes). */
export function partyOf(identity: {
  agentId: string;
  principalId: string;
  signing: { kty: string; crv: string; x: string };
}): AgreementParty {
  return {
    agentId: identity.agentId,
    principalId: identity.principalId,
    signing: { kty: "OKP", crv: "Ed25519", x: identity.signing.x },
  };
}

/** The key id a party's signature names: its agent id (an address without its domain) and key thumbprint. */
export function partyKeyId(party: AgreementParty): string {
  return keyId(localPartOf(party.agentId), party.signing);
}

/** Signs the document's canonical bytes with the signer's key: a detached JWS. */
export function signAgreement(document: AgreementDocument, signer: Signer): string {
  const signature = edSign(null, signingInput(signer.protectedB64, document), signer.privateKey);
  return `${signer.protectedB64}..${signature.toString("base64url")}`;
}

export interface AgreementCheck {
  valid: boolean;
  /** What is wrong, each with a JSON Pointer into the agreement file. */
  problems: { path: string; message: string }[];
  /** The parties whose signature verified. */
  signedBy: string[];
}

/** Verifies one party's signature over the document; returns why it fails, or undefined. */
export function checkPartySignature(
  document: AgreementDocument,
  party: AgreementParty,
  signature: string,
): string | undefined {
  const separator = signature.indexOf("..");
  if (separator <= 0) return "is not a detached compact JWS";
  let kid: string;
  try {
    kid = decodeProtectedHeader(signature.slice(0, separator)).kid;
  } catch (err) {
    return (err as Error).message;
  }
  if (agentOfKeyId(kid) !== localPartOf(party.agentId)) return `is signed by ${kid}, not by ${party.agentId}`;
  if (kid !== partyKeyId(party)) return `key ${kid} is not the key listed for ${party.agentId}`;
  const raw = signature.slice(separator + 2);
  const bytes = Buffer.from(raw, "base64url");
  if (bytes.length !== 64 || bytes.toString("base64url") !== raw) return "is not 64 base64url-encoded bytes";
  let key: ReturnType<typeof importPublicKey>;
  try {
    key = importPublicKey({ ...party.signing, kty: "OKP", crv: "Ed25519" });
  } catch {
    return `the public key of ${party.agentId} is not a valid Ed25519 key`;
  }
  const ok = edVerify(null, signingInput(signature.slice(0, separator), document), key, bytes);
  return ok ? undefined : "does not match the document (tampered, or signed by another key)";
}

/**
 * Checks an agreement offline: its shape, that both parties signed exactly this document, and (when
 * `trustedKeys` are given) that the listed keys are the parties' known public keys.
 */
export function verifyAgreement(input: unknown, trustedKeys: PublicIdentity[] = []): AgreementCheck {
  const parsed = SignedAgreement.safeParse(input);
  if (!parsed.success) {
    return {
      valid: false,
      signedBy: [],
      problems: problemsOf(parsed.error),
    };
  }
  const { document, signatures } = parsed.data;
  const problems: AgreementCheck["problems"] = [];
  const signedBy: string[] = [];
  if (document.parties[0].agentId === document.parties[1].agentId) {
    problems.push({ path: "/document/parties", message: "an agreement needs two different agents" });
  }
  if (!document.parties.some((p) => p.agentId === document.offeredBy)) {
    problems.push({ path: "/document/offeredBy", message: "must be one of the parties" });
  }
  document.parties.forEach((party, i) => {
    const trusted = trustedKeys.find((k) => k.agentId === party.agentId);
    if (trusted && trusted.signing.x !== party.signing.x) {
      problems.push({
        path: `/document/parties/${i}/signing`,
        message: `is not the public key given for ${party.agentId}`,
      });
    }
    // By key id: two parties of different domains may share an agent id.
    const own = signatures.findIndex((s) => s.kid === partyKeyId(party));
    const index =
      own !== -1 ? own : signatures.findIndex((s) => agentOfKeyId(s.kid) === localPartOf(party.agentId));
    const entry = signatures[index];
    if (!entry) {
      problems.push({ path: "/signatures", message: `no signature of ${party.agentId}` });
      return;
    }
    const failure = checkPartySignature(document, party, entry.signature);
    if (failure)
      problems.push({ path: `/signatures/${index}`, message: `${party.agentId}'s signature ${failure}` });
    else if (entry.kid !== partyKeyId(party)) {
      problems.push({ path: `/signatures/${index}/kid`, message: `must be ${partyKeyId(party)}` });
    } else signedBy.push(party.agentId);
  });
  return { valid: problems.length === 0, problems, signedBy };
}
