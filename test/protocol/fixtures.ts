import { createHash, createPrivateKey, type KeyObject } from "node:crypto";
import { expect } from "vitest";
import {
  AcpError,
  createSigner,
  importPublicKey,
  type KeyResolver,
  keyId,
  type PrivateIdentity,
  PrivateIdentity as PrivateIdentitySchema,
  type SenderIdentity,
} from "../../src/protocol/index.js";

/** The ACP core protocol's own examples (its announce, request and response), verbatim. */
export function exampleAnnounce() {
  return {
    jsonrpc: "2.0",
    method: "agent.announce",
    params: {
      headers: {
        "agent-id": "agent-alpha",
        "principal-id": "principal-a",
        timestamp: "2026-02-14T12:00:00Z",
        "message-type": "notification",
        "trust-layer-version": "1.0.0",
        "skill-layers-loaded": [0, 1, 2],
      },
      body: {
        capabilities: ["calendar-management", "document-retrieval"],
        purpose: "Coordinate scheduling between principals",
      },
    },
  } as Record<string, unknown> & {
    params: { headers: Record<string, unknown>; body: Record<string, unknown> };
  };
}

export function exampleRequest() {
  return {
    jsonrpc: "2.0",
    method: "agent.request",
    params: {
      headers: {
        "agent-id": "agent-alpha",
        "principal-id": "principal-a",
        timestamp: "2026-02-14T14:30:00Z",
        "message-type": "request",
        "trust-layer-version": "1.0.0",
        "skill-layers-loaded": [0, 1, 2, 3],
      },
      body: {
        action: "get-availability",
        parameters: { date_range: "2026-02-17/2026-02-21", duration_minutes: 60 },
      },
    },
    id: "req-7f3a-4b2c-9d1e",
  } as Record<string, unknown> & {
    params: { headers: Record<string, unknown>; body: Record<string, unknown> };
  };
}

export function exampleResponse() {
  return {
    jsonrpc: "2.0",
    result: {
      headers: {
        "agent-id": "agent-beta",
        "principal-id": "principal-b",
        timestamp: "2026-02-14T14:30:05Z",
        "message-type": "response",
        "trust-layer-version": "1.0.0",
        "skill-layers-loaded": [0, 1, 2],
      },
      body: {
        available_slots: ["2026-02-18T10:00:00Z", "2026-02-19T14:00:00Z", "2026-02-20T09:00:00Z"],
      },
    },
    id: "req-7f3a-4b2c-9d1e",
  } as Record<string, unknown> & {
    result: { headers: Record<string, unknown>; body: Record<string, unknown> };
  };
}

/** A handoff in the core protocol's terms: what is completed, what remains, and the context. */
export function sampleHandoff() {
  return {
    jsonrpc: "2.0",
    method: "agent.handoff",
    params: {
      headers: {
        "agent-id": "agent-alpha",
        "principal-id": "principal-a",
        timestamp: "2026-02-14T15:00:00Z",
        "message-type": "handoff",
        "trust-layer-version": "1.0.0",
        "skill-layers-loaded": [0, 1, 2, 3],
      },
      body: {
        completed: ["collected availability of principal-b"],
        remaining: "book the 2026-02-18 10:00 slot and send invitations",
        context: { slot: "2026-02-18T10:00:00Z", duration_minutes: 60 },
      },
    },
    id: "handoff-0001",
  } as Record<string, unknown> & {
    params: { headers: Record<string, unknown>; body: Record<string, unknown> };
  };
}

const PKCS8_PREFIX = {
  Ed25519: "302e020100300506032b657004220420",
  X25519: "302e020100300506032b656e04220420",
};

/** A private JWK derived from a fixed seed: the same key on every run (for vectors and stable tests). */
function jwkFromSeed(curve: "Ed25519" | "X25519", label: string) {
  const seed = createHash("sha256").update(`acp-kit test key: ${label}`).digest();
  const der = Buffer.concat([Buffer.from(PKCS8_PREFIX[curve], "hex"), seed]);
  const jwk = createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "jwk" });
  return { kty: "OKP", crv: curve, x: String(jwk.x), d: String(jwk.d) };
}

/** A deterministic identity; `label` lets one agent have several distinct keys. */
export function fixedIdentity(agentId: string, principalId: string, label = agentId): PrivateIdentity {
  const signing = jwkFromSeed("Ed25519", `${label}/signing`);
  const encryption = jwkFromSeed("X25519", `${label}/encryption`);
  return PrivateIdentitySchema.parse({
    agentId,
    principalId,
    signing: { ...signing, kid: keyId(agentId, signing) },
    encryption: { ...encryption, kid: keyId(agentId, encryption) },
    createdAt: "2026-02-14T00:00:00.000Z",
  });
}

export const alpha = fixedIdentity("agent-alpha", "principal-a");
export const beta = fixedIdentity("agent-beta", "principal-b");
export const gamma = fixedIdentity("agent-gamma", "principal-c");
export const alphaSigner = createSigner(alpha);
export const betaSigner = createSigner(beta);
export const gammaSigner = createSigner(gamma);

export function senderOf(identity: PrivateIdentity, layers: number[] = [0, 1, 2]): SenderIdentity {
  return { agentId: identity.agentId, principalId: identity.principalId, layers };
}

/** A key registry holding exactly these identities' signing keys. */
export function keyRing(...identities: PrivateIdentity[]): KeyResolver {
  const keys = new Map<string, KeyObject>(
    identities.map((identity) => [createSigner(identity).kid, importPublicKey(identity.signing)]),
  );
  return (agentId, kid) => (kid.startsWith(`${agentId}#`) ? keys.get(kid) : undefined);
}

/** Runs `fn`, expecting an AcpError; returns it for further checks. */
export function acpErrorOf(fn: () => unknown): AcpError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AcpError);
    return err as AcpError;
  }
  throw new Error("expected an AcpError, but nothing was thrown");
}

export async function acpErrorOfAsync(fn: () => Promise<unknown>): Promise<AcpError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AcpError);
    return err as AcpError;
  }
  throw new Error("expected an AcpError, but nothing was thrown");
}

/** The JSON pointers of the problems an error lists. */
export const problemPaths = (err: AcpError): string[] => (err.data.problems ?? []).map((p) => p.path);

/** A deep copy with one change applied: the way tests make one message malformed at a time. */
export function mutated<T>(message: T, change: (copy: T) => void): T {
  const copy = structuredClone(message);
  change(copy);
  return copy;
}
