import { describe, expect, it } from "vitest";
import { initialTrust, TrustLedger, trustLevel } from "../../src/identity/index.js";

const basis = (knownPrincipal: boolean, sharedContext: boolean, layers: number[]) => ({
  knownPrincipal,
  sharedContext,
  layers,
});

describe("initial trust from the core protocol's four bases", () => {
  it.each([
    ["unknown principal: baseline", basis(false, false, [0]), 0.3, "baseline", 0.6],
    [
      "unknown principal declaring more layers: still baseline",
      basis(false, false, [0, 1, 2, 3]),
      0.39,
      "baseline",
      0.6,
    ],
    ["known principal: elevated", basis(true, false, [0, 1]), 0.58, "elevated", 0.95],
    ["shared context: elevated", basis(false, true, [0, 1]), 0.48, "elevated", 0.8],
    [
      "known principal with shared context and all layers: high",
      basis(true, true, [0, 1, 2, 3]),
      0.79,
      "high",
      0.95,
    ],
    ["no declared layers: untrusted, whoever the principal", basis(true, true, []), 0.15, "untrusted", 0.95],
  ] as const)("%s", (_name, b, score, level, cap) => {
    const initial = initialTrust({ ...b, layers: [...b.layers] });
    expect(initial).toEqual({ score, cap });
    expect(trustLevel(initial.score)).toBe(level);
  });

  it("counts each declared layer above the foundation once, at most three", () => {
    expect(initialTrust(basis(false, false, [0, 1, 1, 1])).score).toBe(0.33);
    expect(initialTrust(basis(false, false, [0, 1, 2, 3, 4, 5])).score).toBe(0.39);
  });

  it("maps scores to levels at fixed thresholds", () => {
    expect([0, 0.19, 0.2, 0.44, 0.45, 0.69, 0.7, 1].map(trustLevel)).toEqual([
      "untrusted",
      "untrusted",
      "baseline",
      "baseline",
      "elevated",
      "elevated",
      "high",
      "high",
    ]);
  });
});

describe("TrustLedger", () => {
  const clock = () => new Date("2026-02-14T12:00:00Z");
  const ledger = () =>
    new TrustLedger({ knownPrincipals: ["principal-b"], sharedContextPrincipals: ["principal-c"] }, clock);

  it("establishes records from its policy, as plain data", () => {
    const trust = ledger();
    expect(trust.establish("agent-beta", "principal-b", [0, 1, 2])).toEqual({
      peer: "agent-beta",
      principalId: "principal-b",
      score: 0.61,
      level: "elevated",
      cap: 0.95,
      basis: { knownPrincipal: true, sharedContext: false, layers: [0, 1, 2] },
      observations: { "bad-signature": 0, timeout: 0, "rejected-request": 0, "clean-exchange": 0 },
      updatedAt: "2026-02-14T12:00:00.000Z",
    });
    expect(trust.establish("agent-gamma", "principal-c", [0]).level).toBe("elevated");
    expect(trust.establish("agent-delta", "principal-d", [0]).level).toBe("baseline");
    expect(trust.list().map((r) => r.peer)).toEqual(["agent-beta", "agent-gamma", "agent-delta"]);
    expect(JSON.parse(JSON.stringify(trust.list()))).toEqual(trust.list());
  });

  it("lowers trust for bad signatures, timeouts and rejected requests, never below zero", () => {
    const trust = ledger();
    trust.establish("agent-delta", "principal-d", [0]);
    expect(trust.observe("agent-delta", "timeout")?.score).toBe(0.25);
    expect(trust.observe("agent-delta", "rejected-request")?.score).toBe(0.2);
    const afterBadSignature = trust.observe("agent-delta", "bad-signature");
    expect(afterBadSignature).toMatchObject({ score: 0, level: "untrusted" });
    expect(afterBadSignature?.observations).toEqual({
      "bad-signature": 1,
      timeout: 1,
      "rejected-request": 1,
      "clean-exchange": 0,
    });
  });

  it("raises trust slowly with a clean history, up to the cap of its basis", () => {
    const trust = ledger();
    trust.establish("agent-delta", "principal-d", [0]);
    let record = trust.get("agent-delta");
    for (let i = 0; i < 10; i++) record = trust.observe("agent-delta", "clean-exchange");
    expect(record?.score).toBe(0.4);
    for (let i = 0; i < 100; i++) record = trust.observe("agent-delta", "clean-exchange");
    expect(record).toMatchObject({ score: 0.6, level: "elevated", cap: 0.6 });
    expect(record?.observations["clean-exchange"]).toBe(110);
  });

  it("a new handshake never launders a bad history", () => {
    const trust = ledger();
    trust.establish("agent-beta", "principal-b", [0, 1, 2]);
    trust.observe("agent-beta", "bad-signature");
    const again = trust.establish("agent-beta", "principal-b", [0, 1, 2]);
    expect(again.score).toBe(0.31);
    expect(again.observations["bad-signature"]).toBe(1);
  });

  it("ignores observations of unknown peers and hands out copies only", () => {
    const trust = ledger();
    expect(trust.observe("agent-nobody", "timeout")).toBeUndefined();
    const record = trust.establish("agent-beta", "principal-b", [0]);
    record.score = 1;
    const fetched = trust.get("agent-beta");
    if (fetched) fetched.observations.timeout = 99;
    expect(trust.get("agent-beta")).toMatchObject({ score: 0.55, observations: { timeout: 0 } });
    expect(trust.get("agent-nobody")).toBeUndefined();
  });
});
