import { describe, expect, it } from "vitest";
import { Handshakes } from "../../src/handshake/index.js";
import { TrustLedger } from "../../src/identity/index.js";
import {
  buildAnnounce,
  createSigner,
  type MethodMessage,
  type PrivateIdentity,
  ReplayGuard,
  type Signer,
  signMessage,
  verifyEnvelope,
} from "../../src/protocol/index.js";
import { alpha, beta, keyRing, senderOf } from "../protocol/fixtures.js";

const ring = keyRing(alpha, beta);

interface Agent {
  handshakes: Handshakes;
  signer: Signer;
  receive(message: MethodMessage, from: Agent): MethodMessage[];
}

function agent(identity: PrivateIdentity): Agent {
  const handshakes = new Handshakes({
    self: senderOf(identity, [0, 1, 2]),
    announce: { capabilities: ["calendar"], purpose: "scheduling" },
    capabilities: { tools: [], domains: [], limits: [], requests: [] },
    trust: new TrustLedger(),
  });
  const replay = new ReplayGuard();
  const signer = createSigner(identity);
  const receive = (message: MethodMessage, from: Agent): MethodMessage[] =>
    handshakes.receive(
      verifyEnvelope(JSON.stringify(signMessage(message, from.signer)), {
        resolveKey: ring,
        replay,
        expectedRecipient: identity.agentId,
      }),
    );
  return { handshakes, signer, receive };
}

/** Delivers messages back and forth until quiet; returns how many were exchanged. */
function converse(a: Agent, b: Agent, first: MethodMessage[]): number {
  let queue = first.map((message) => ({ message, from: a, to: b }));
  let delivered = 0;
  while (queue.length > 0) {
    if (++delivered > 50) throw new Error("the handshake does not converge: announce storm");
    const next = queue.shift()!;
    queue = [
      ...queue,
      ...next.to
        .receive(next.message, next.from)
        .map((message) => ({ message, from: next.to, to: next.from })),
    ];
  }
  return delivered;
}

describe("re-announcing an established relationship", () => {
  it("converges instead of answering announces with announces forever", () => {
    const a = agent(alpha);
    const b = agent(beta);
    converse(a, b, a.handshakes.start("agent-beta"));
    expect(a.handshakes.isEstablished("agent-beta")).toBe(true);
    // An extra initiating announce while both sides are established (a duplicate, or sent by
    // another process of the same agent): both sides had the other's announce already.
    const extra = buildAnnounce(senderOf(alpha, [0, 1, 2]), "agent-beta", {
      capabilities: ["calendar"],
      purpose: "again",
    });
    const exchanged = converse(a, b, [extra]);
    expect(exchanged).toBeLessThanOrEqual(5);
    expect(a.handshakes.isEstablished("agent-beta")).toBe(true);
    expect(b.handshakes.isEstablished("agent-alpha")).toBe(true);
  });

  it("marks an announce sent in answer as a reply, and a reply gets no announce back", () => {
    const a = agent(alpha);
    const b = agent(beta);
    const [announce] = a.handshakes.start("agent-beta");
    const replies = b.receive(announce!, a);
    expect(replies.map((m) => [m.method, (m.params.body as { reply?: boolean }).reply])).toEqual([
      ["agent.announce", true],
      ["agent.capabilities", undefined],
    ]);
    expect(a.receive(replies[0]!, b).map((m) => m.method)).toEqual(["agent.capabilities"]);
  });
});
