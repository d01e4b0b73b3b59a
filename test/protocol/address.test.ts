import { describe, expect, it } from "vitest";
import {
  AgentAddress,
  AgentRef,
  buildRequest,
  decryptBody,
  domainOf,
  encryptBody,
  FederationDomain,
  isRemoteRef,
  localPartOf,
  qualifiedPrincipal,
  signMessage,
  validateMessage,
  verifyEnvelope,
} from "../../src/protocol/index.js";
import {
  acpErrorOf,
  acpErrorOfAsync,
  alpha,
  alphaSigner,
  beta,
  gammaSigner,
  keyRing,
  mutated,
} from "./fixtures.js";

const NOW = new Date();
/** alpha at a.example writing to beta at b.example: both addresses, the principal qualified. */
const crossDomain = () =>
  buildRequest(
    {
      agentId: "agent-alpha@a.example",
      principalId: qualifiedPrincipal("principal-a", "a.example"),
      layers: [0, 1],
    },
    "agent-beta@b.example",
    { action: "ping" },
    { now: NOW },
  );

describe("addresses", () => {
  it("accepts agent ids and agent-id@domain, and refuses malformed domains", () => {
    for (const ok of ["beta", "beta@b.example", "b-2@x", "a_b@sub.b-c.example"])
      expect(AgentRef.safeParse(ok).success).toBe(true);
    for (const bad of [
      "beta@",
      "@b.example",
      "beta@B.example",
      "beta@b..example",
      "beta@-b.example",
      "beta@b.example.",
      "be ta@b.example",
      "beta@b@c",
      `beta@${"a".repeat(121)}`,
    ])
      expect(AgentRef.safeParse(bad).success, bad).toBe(false);
    expect(AgentAddress.safeParse("beta").success).toBe(false);
    expect(FederationDomain.safeParse("b.example").success).toBe(true);
    expect(FederationDomain.safeParse("B.example").success).toBe(false);
  });

  it("splits an address into agent id and domain", () => {
    expect(localPartOf("beta@b.example")).toBe("beta");
    expect(localPartOf("beta")).toBe("beta");
    expect(domainOf("beta@b.example")).toBe("b.example");
    expect(domainOf("beta")).toBeUndefined();
    expect(isRemoteRef("beta@b.example", "a.example")).toBe(true);
    expect(isRemoteRef("beta@b.example", "b.example")).toBe(false);
    expect(isRemoteRef("beta", "a.example")).toBe(false);
    expect(isRemoteRef("beta@b.example", undefined)).toBe(true);
  });

  it("validates a message whose sender and recipient are addresses, naming a bad one", () => {
    expect(() => validateMessage(signMessage(crossDomain(), alphaSigner), { envelope: true })).not.toThrow();
    const bad = mutated(crossDomain(), (m) => {
      m.params.headers["recipient-id"] = "agent-beta@B.example";
    });
    const err = acpErrorOf(() => validateMessage(signMessage(bad, alphaSigner), { envelope: true }));
    expect(err.code).toBe(-32602);
    expect(err.data.problems?.map((p) => p.path)).toEqual(["/params/headers/recipient-id"]);
  });
});

describe("signatures across domains", () => {
  const ring = keyRing(alpha, beta);
  const resolveByLocalPart = (agentId: string, kid: string) => ring(localPartOf(agentId), kid);

  it("verifies a message signed by the key named for the address's local part", () => {
    const verified = verifyEnvelope(signMessage(crossDomain(), alphaSigner), {
      resolveKey: resolveByLocalPart,
      expectedRecipient: "agent-beta@b.example",
    });
    expect(verified.headers["agent-id"]).toBe("agent-alpha@a.example");
    expect(verified.kid).toBe(alphaSigner.kid);
  });

  it("refuses a key of another agent, and a domain rewritten after signing", () => {
    const byGamma = acpErrorOf(() =>
      verifyEnvelope(signMessage(crossDomain(), gammaSigner), { resolveKey: resolveByLocalPart }),
    );
    expect(byGamma.kind).toBe("SignatureInvalid");
    const signed = signMessage(crossDomain(), alphaSigner);
    const rerouted = mutated(signed, (m) => {
      m.params.headers["recipient-id"] = "agent-beta@c.example";
    });
    expect(acpErrorOf(() => verifyEnvelope(rerouted, { resolveKey: resolveByLocalPart })).kind).toBe(
      "SignatureInvalid",
    );
    const respoofed = mutated(signed, (m) => {
      m.params.headers["agent-id"] = "agent-alpha@c.example";
    });
    expect(acpErrorOf(() => verifyEnvelope(respoofed, { resolveKey: resolveByLocalPart })).kind).toBe(
      "SignatureInvalid",
    );
  });

  it("decrypts a body encrypted to the recipient's address, and only with that address allowed", async () => {
    const body = await encryptBody(
      { secret: "42" },
      {
        senderId: "agent-alpha@a.example",
        recipientId: "agent-beta@b.example",
        recipientKey: beta.encryption,
      },
    );
    expect(await decryptBody(body, beta, "agent-alpha@a.example", "agent-beta@b.example")).toEqual({
      secret: "42",
    });
    const err = await acpErrorOfAsync(() => decryptBody(body, beta, "agent-alpha@a.example"));
    expect(err.kind).toBe("DecryptionFailed");
  });
});
