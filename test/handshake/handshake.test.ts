import { describe, expect, it } from "vitest";
import {
  commonLayers,
  type HandshakeEvent,
  type HandshakeOptions,
  Handshakes,
} from "../../src/handshake/index.js";
import { TrustLedger } from "../../src/identity/index.js";
import {
  type AcpError,
  buildAnnounce,
  buildCapabilities,
  buildRequest,
  createSigner,
  ErrorCode,
  type MethodMessage,
  type PrivateIdentity,
  ReplayGuard,
  type Signer,
  signMessage,
  type VerifiedEnvelope,
  verifyEnvelope,
} from "../../src/protocol/index.js";
import { acpErrorOf, alpha, beta, fixedIdentity, keyRing, senderOf } from "../protocol/fixtures.js";

const NOW = new Date("2026-02-14T12:00:00Z");
const alphaSecondKey = fixedIdentity("agent-alpha", "principal-a", "alpha-rotated");
const ring = keyRing(alpha, beta, alphaSecondKey);

const capabilities = (tool: string) => ({
  tools: [tool, { name: "search", description: "full-text search" }],
  domains: ["scheduling"],
  limits: ["no bookings after 18:00"],
  requests: ["availability"],
});

/** One agent: its handshake state machine, its signer, and the receive pipeline in front of it. */
function agent(identity: PrivateIdentity, layers: number[], options: Partial<HandshakeOptions> = {}) {
  const events: HandshakeEvent[] = [];
  const trust = new TrustLedger({ knownPrincipals: ["principal-a"] }, () => NOW);
  const handshakes = new Handshakes(
    {
      self: senderOf(identity, layers),
      announce: {
        capabilities: ["calendar-management"],
        purpose: `${identity.agentId} coordinates scheduling`,
      },
      capabilities: capabilities(`${identity.agentId}-calendar`),
      trust,
      now: () => NOW,
      ...options,
    },
    (event) => events.push(event),
  );
  const replay = new ReplayGuard({ now: () => NOW.getTime() });
  /** What the real receive path does: verify the envelope, then hand it to the state machine. */
  const receive = (wire: string): VerifiedEnvelope => {
    const verified = verifyEnvelope(wire, { resolveKey: ring, replay, expectedRecipient: identity.agentId });
    return verified;
  };
  return { identity, signer: createSigner(identity), handshakes, events, trust, receive };
}
type Agent = ReturnType<typeof agent>;

const wireOf = (message: object, signer: Signer) => JSON.stringify(signMessage(message, signer));

/**
 * A network between two agents: first in, first out, like one NATS subject per recipient. Each
 * message is signed by its sender and verified by its receiver before the state machine sees it.
 */
function network() {
  const queue: { from: Agent; to: Agent; message: MethodMessage }[] = [];
  const send = (from: Agent, to: Agent, messages: MethodMessage[]) => {
    for (const message of messages) queue.push({ from, to, message });
  };
  const run = () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const { from, to, message } = next;
      send(to, from, to.handshakes.receive(to.receive(wireOf(message, from.signer))));
    }
  };
  return { send, run };
}

function exchange(from: Agent, to: Agent, outbound: MethodMessage[]): void {
  const net = network();
  net.send(from, to, outbound);
  net.run();
}

function establishedPair(alphaLayers = [0, 1, 2, 3], betaLayers = [0, 1, 2]) {
  const a = agent(alpha, alphaLayers);
  const b = agent(beta, betaLayers);
  exchange(a, b, a.handshakes.start("agent-beta"));
  return { a, b };
}

/** A substantive request from alpha, as beta's gate sees it after verification. */
function substantive(
  a: Agent,
  b: Agent,
  layers = [0, 1, 2, 3],
  signer = a.signer,
  principalId = "principal-a",
) {
  const request = buildRequest(
    { agentId: "agent-alpha", principalId, layers },
    "agent-beta",
    { action: "get-availability" },
    { now: NOW },
  );
  const { headers, kid } = b.receive(wireOf(request, signer));
  return () => b.handshakes.requireEstablished(headers, kid);
}

describe("the four-step handshake between two agents", () => {
  it("reaches established on both sides with real signed and verified messages", () => {
    const { a, b } = establishedPair();
    for (const [self, peer] of [
      [a, "agent-beta"],
      [b, "agent-alpha"],
    ] as const) {
      expect(self.handshakes.isEstablished(peer)).toBe(true);
      const state = self.handshakes.get(peer);
      expect(state).toMatchObject({
        state: "established",
        announceSent: true,
        announceReceived: true,
        capabilitiesSent: true,
        capabilitiesReceived: true,
        commonLayers: [0, 1, 2],
        maximumCaution: false,
        establishedAt: NOW.toISOString(),
      });
      expect(state.trust?.peer).toBe(peer);
    }
    expect(b.handshakes.get("agent-alpha")).toMatchObject({
      principalId: "principal-a",
      kid: a.signer.kid,
      layers: [0, 1, 2, 3],
      announce: { purpose: "agent-alpha coordinates scheduling" },
      capabilities: capabilities("agent-alpha-calendar"),
      trust: { level: "elevated" }, // principal-a is known to beta's policy
    });
    expect(a.handshakes.get("agent-beta").trust?.level).toBe("baseline");
  });

  it("walks the steps in the core protocol's order and reports each one", () => {
    const { a, b } = establishedPair();
    const steps = (events: HandshakeEvent[]) => events.map((e) => `${e.step}:${e.direction}`);
    expect(steps(a.events)).toEqual([
      "announce:sent",
      "announce:received",
      "verify:local",
      "capabilities:sent",
      "capabilities:received",
      "trust:local",
    ]);
    expect(steps(b.events)).toEqual([
      "announce:received",
      "verify:local",
      "announce:sent",
      "capabilities:sent",
      "capabilities:received",
      "trust:local",
    ]);
    expect(b.events.map((e) => e.state)).toEqual([
      "announcing",
      "announcing",
      "exchanging-capabilities",
      "exchanging-capabilities",
      "exchanging-capabilities",
      "established",
    ]);
  });

  it("also completes when both sides start at once", () => {
    const a = agent(alpha, [0, 1]);
    const b = agent(beta, [0, 1]);
    const net = network();
    net.send(a, b, a.handshakes.start("agent-beta"));
    net.send(b, a, b.handshakes.start("agent-alpha"));
    net.run();
    expect(a.handshakes.isEstablished("agent-beta")).toBe(true);
    expect(b.handshakes.isEstablished("agent-alpha")).toBe(true);
  });

  it("an established relationship needs no new announce", () => {
    const { a } = establishedPair();
    expect(a.handshakes.start("agent-beta")).toEqual([]);
  });

  it("lets substantive messages through once established", () => {
    const { a, b } = establishedPair();
    expect(substantive(a, b)().state).toBe("established");
  });
});

describe("handshake required (-32004)", () => {
  it("for a substantive message from a peer that never announced", () => {
    const a = agent(alpha, [0, 1, 2, 3]);
    const b = agent(beta, [0, 1, 2]);
    const err = acpErrorOf(substantive(a, b));
    expect(err.code).toBe(ErrorCode.HandshakeRequired);
    expect(err.data).toMatchObject({ peer: "agent-alpha", state: "none" });
  });

  it("for a substantive message before capabilities were exchanged", () => {
    const a = agent(alpha, [0, 1, 2, 3]);
    const b = agent(beta, [0, 1, 2]);
    const [announce] = a.handshakes.start("agent-beta");
    b.handshakes.receive(b.receive(wireOf(announce!, a.signer)));
    const err = acpErrorOf(substantive(a, b));
    expect(err.data.state).toBe("exchanging-capabilities");
  });

  it("when the signing key changes mid-relationship, and the peer is reset", () => {
    const { a, b } = establishedPair();
    const err = acpErrorOf(substantive(a, b, [0, 1, 2, 3], createSigner(alphaSecondKey)));
    expect(err.code).toBe(ErrorCode.HandshakeRequired);
    expect(err.message).toMatch(/signing key changed/);
    expect(b.handshakes.isEstablished("agent-alpha")).toBe(false);
    expect(acpErrorOf(substantive(a, b)).data.state).toBe("none");
  });

  it("when the declared layers change mid-relationship, and the peer is reset", () => {
    const { a, b } = establishedPair();
    const err = acpErrorOf(substantive(a, b, [0, 1, 2]));
    expect(err.code).toBe(ErrorCode.HandshakeRequired);
    expect(err.message).toMatch(/declared skill layers changed/);
    expect(b.handshakes.get("agent-alpha").state).toBe("none");
  });

  it("when the principal changes mid-relationship", () => {
    const { a, b } = establishedPair();
    expect(acpErrorOf(substantive(a, b, [0, 1, 2, 3], a.signer, "principal-z")).message).toMatch(
      /principal-id changed/,
    );
  });

  it("but not for the same layers in another order", () => {
    const { a, b } = establishedPair();
    expect(() => substantive(a, b, [3, 2, 1, 0])()).not.toThrow();
  });

  it("for capabilities before an announce, or from another key than the announce", () => {
    const a = agent(alpha, [0, 1]);
    const b = agent(beta, [0, 1]);
    const caps = buildCapabilities(senderOf(alpha, [0, 1]), "agent-beta", capabilities("x"), { now: NOW });
    expect(acpErrorOf(() => b.handshakes.receive(b.receive(wireOf(caps, a.signer)))).code).toBe(
      ErrorCode.HandshakeRequired,
    );
    const [announce] = a.handshakes.start("agent-beta");
    b.handshakes.receive(b.receive(wireOf(announce!, a.signer)));
    const otherKey = buildCapabilities(senderOf(alpha, [0, 1]), "agent-beta", capabilities("y"), {
      now: NOW,
    });
    const err = acpErrorOf(() =>
      b.handshakes.receive(b.receive(wireOf(otherKey, createSigner(alphaSecondKey)))),
    );
    expect(err.code).toBe(ErrorCode.HandshakeRequired);
    expect(b.handshakes.get("agent-alpha").capabilitiesReceived).toBe(false);
  });

  it("a key change is healed by a new handshake", () => {
    const { a, b } = establishedPair();
    acpErrorOf(substantive(a, b, [0, 1, 2, 3], createSigner(alphaSecondKey)));
    const rotated = agent(alphaSecondKey, [0, 1, 2, 3]);
    exchange(rotated, b, rotated.handshakes.start("agent-beta"));
    expect(b.handshakes.get("agent-alpha")).toMatchObject({ state: "established", kid: rotated.signer.kid });
    expect(() => substantive(rotated, b)()).not.toThrow();
  });
});

describe("a fresh announce from an established peer restarts the handshake", () => {
  it("clears the old relationship and answers with announce and capabilities", () => {
    const { a, b } = establishedPair();
    const restarted = agent(alpha, [0, 1, 2, 3]);
    const [announce] = restarted.handshakes.start("agent-beta");
    const replies = b.handshakes.receive(b.receive(wireOf(announce!, restarted.signer)));
    expect(replies.map((m) => m.method)).toEqual(["agent.announce", "agent.capabilities"]);
    const state = b.handshakes.get("agent-alpha");
    expect(state.state).toBe("exchanging-capabilities");
    expect(state.capabilities).toBeUndefined();
    expect(state.trust).toBeUndefined();
    expect(state.establishedAt).toBeUndefined();
    exchange(b, restarted, replies);
    expect(b.handshakes.isEstablished("agent-alpha")).toBe(true);
    expect(restarted.handshakes.isEstablished("agent-beta")).toBe(true);
    expect(a.handshakes.isEstablished("agent-beta")).toBe(true); // the old instance is simply gone
  });
});

describe("layers", () => {
  it("communicate at the layers both declared, never assuming an undeclared one", () => {
    expect(commonLayers([0, 1, 2, 3], [0, 1, 2])).toEqual([0, 1, 2]);
    expect(commonLayers([0, 2, 3], [3, 1, 0])).toEqual([0, 3]);
    expect(commonLayers([1, 1, 0], [0, 1, 1])).toEqual([0, 1]);
    expect(commonLayers([0, 1], [])).toEqual([]);
  });

  it("an agent declaring no layers is declined (-32008) and leaves no state", () => {
    const silent = agent(alpha, []);
    const b = agent(beta, [0, 1, 2]);
    const [announce] = silent.handshakes.start("agent-beta");
    const err = acpErrorOf(() => b.handshakes.receive(b.receive(wireOf(announce!, silent.signer))));
    expect(err.code).toBe(ErrorCode.LayersDeclined);
    expect(err.data.problems).toEqual([
      { path: "/params/headers/skill-layers-loaded", message: "must declare at least one layer" },
    ]);
    expect(b.handshakes.list()).toEqual([]);
  });

  it("or accepted with maximum caution when the policy says so", () => {
    const silent = agent(alpha, []);
    const b = agent(beta, [0, 1, 2], { undeclaredLayers: "maximum-caution" });
    exchange(silent, b, silent.handshakes.start("agent-beta"));
    expect(b.handshakes.get("agent-alpha")).toMatchObject({
      state: "established",
      maximumCaution: true,
      commonLayers: [],
      trust: { level: "untrusted" },
    });
  });
});

describe("what is not a handshake message", () => {
  it("is refused by receive() as an invalid request", () => {
    const a = agent(alpha, [0]);
    const b = agent(beta, [0]);
    const request = buildRequest(senderOf(alpha, [0]), "agent-beta", {}, { now: NOW });
    const err: AcpError = acpErrorOf(() => b.handshakes.receive(b.receive(wireOf(request, a.signer))));
    expect(err.code).toBe(ErrorCode.InvalidRequest);
    const announce = buildAnnounce(
      senderOf(alpha, [0]),
      "agent-beta",
      { capabilities: [], purpose: "x" },
      { now: NOW },
    );
    expect(b.handshakes.receive(b.receive(wireOf(announce, a.signer))).length).toBe(2);
  });
});
