/**
 * What the receive side (src/client/inbound.ts) refuses, driven through a gateway the test plays at
 * the socket (scripted-gateway.ts): a delivery is checked end to end before anything acts on it,
 * and a refused one is rejected with its reason, reported, never handed to a handler, and only
 * acknowledged when the gateway hands it over again. Milliseconds per test; the same lies against a
 * real gateway are test/security/lying-gateway.test.ts.
 */
import { describe, expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import { GatewayUnreachableError } from "../../src/client/index.js";
import {
  AcpError,
  buildAnnounce,
  buildNotification,
  ErrorCode,
  importPublicKey,
  newMessageId,
  signMessage,
} from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deferred, relayVerifiedConnection, SCHEDULING_ANNOUNCE } from "./fixtures.js";
import { notification, useScriptedPair } from "./scripted-gateway.js";

const tmp = useTmpDir("acp-inbound-");
/** `signed` with its body changed after it was signed. */
function tampered<M extends { params: { body: Record<string, unknown> } }>(signed: M): M {
  return { ...signed, params: { ...signed.params, body: { ...signed.params.body, amount: 1000 } } };
}

const kinds = (errors: Error[]) => errors.map((e) => (e as { kind?: string }).kind);

describe("an agent refuses a delivery that fails its end-to-end checks", () => {
  const t = useScriptedPair(tmp, () => ({ replayWindowMs: 60_000 }));

  /** Bob settled `id` with a reject; the reject's reason. */
  async function rejected(id: string, from = "alice-assistant"): Promise<string> {
    const frame = await t.gw.settled("bob-assistant", id);
    expect(frame).toMatchObject({ type: "reject", id, from });
    return String(frame.reason);
  }

  /** The error codes of the verify steps Bob's audit log records as refused (closes Bob). */
  async function refusalsAudited(): Promise<number[]> {
    await t.bob.close();
    const codes: number[] = [];
    for await (const { entry } of readAudit({ root: `${t.dir}/audit`, agent: "bob-assistant" })) {
      if (entry.step === "verify" && entry.error) codes.push(entry.error.code);
    }
    return codes;
  }

  /** Bob still handles an honest notification afterwards: his chain and socket are healthy. */
  async function stillHealthy(): Promise<void> {
    const honest = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { honest: true }));
    expect(await t.gw.settled("bob-assistant", honest.id)).toEqual({
      type: "acknowledge",
      id: honest.id,
      from: "alice-assistant",
    });
    expect(t.handled.map((h) => h.body)).toEqual([{ honest: true }]);
  }

  it("refuses a message signed for another agent", async () => {
    const trust = t.bob.trust("alice-assistant");
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "carol-assistant"));
    expect(await rejected(frame.id)).toBe(
      `${ErrorCode.Misrouted} addressed to carol-assistant, not bob-assistant`,
    );
    expect(kinds(t.errors)).toEqual(["Misrouted"]);
    // Only a bad signature counts against the sender's trust.
    expect(t.bob.trust("alice-assistant")?.observations).toEqual(trust?.observations);
    await stillHealthy();
    // Only a failed signature or handshake step is a verify step of the audit log.
    expect(await refusalsAudited()).toEqual([]);
  });

  it("refuses a delivery whose id is not the message-id its sender signed, and reports it", async () => {
    const signed = notification(t.a, "bob-assistant");
    const signedId = signed.params.headers["message-id"];
    const lieId = newMessageId();
    t.gw.deliver("bob-assistant", signed, { id: lieId });
    expect(await rejected(lieId)).toBe(
      `${ErrorCode.InvalidRequest} delivered as ${lieId} but signed as ${signedId}`,
    );
    expect(t.errors).toHaveLength(1);
    expect(t.errors[0]).toMatchObject({
      kind: "InvalidRequest",
      message: `refused ${lieId} from alice-assistant: delivered as ${lieId} but signed as ${signedId}`,
      data: {
        problems: [
          { path: "/params/headers/message-id", message: `does not match the delivery id ${lieId}` },
        ],
      },
    });
    await stillHealthy();
  });

  it("a refused delivery handed over again is only acknowledged: no second refusal, no handler", async () => {
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant"), { id: newMessageId() });
    await rejected(frame.id);
    t.gw.deliver("bob-assistant", frame.envelope, { id: frame.id, attempt: 2 });
    await stillHealthy();
    const settles = t.gw.sentBy("bob-assistant").filter((f) => f.id === frame.id);
    expect(settles.map((f) => f.type)).toEqual(["reject", "acknowledge"]);
    expect(t.errors).toHaveLength(1);
  });

  it("refuses a message older than its replay window", async () => {
    const stale = notification(t.a, "bob-assistant", { n: 1 }, new Date(Date.now() - 120_000));
    const frame = t.gw.deliver("bob-assistant", stale);
    expect(await rejected(frame.id)).toMatch(/^-32\d+ .*timestamp/);
    expect(t.handled).toEqual([]);
    await stillHealthy();
  });

  it("refuses a message claiming another principal than the one its sender is registered for", async () => {
    const claim = signMessage(
      buildNotification({ ...t.a.sender, principalId: "mallory" }, "bob-assistant", { n: 1 }),
      t.a.signer,
    );
    const frame = t.gw.deliver("bob-assistant", claim);
    expect(await rejected(frame.id)).toBe(
      `${ErrorCode.Forbidden} alice-assistant is registered for principal alice, not mallory`,
    );
    expect(kinds(t.errors)).toEqual(["Forbidden"]);
    await stillHealthy();
  });

  it("refuses a tampered message, lowers its sender's trust and audits the failed verification", async () => {
    const before = t.bob.trust("alice-assistant")!.score;
    const frame = t.gw.deliver("bob-assistant", tampered(notification(t.a, "bob-assistant", { amount: 1 })));
    expect(await rejected(frame.id)).toMatch(new RegExp(`^${ErrorCode.SignatureInvalid} `));
    expect(t.bob.trust("alice-assistant")).toMatchObject({
      score: Math.round((before - 0.3) * 1000) / 1000,
      observations: { "bad-signature": 1 },
    });
    expect(t.errors[0]?.message).toMatch(new RegExp(`^refused ${frame.id} from alice-assistant: `));
    await stillHealthy();
    expect(await refusalsAudited()).toEqual([ErrorCode.SignatureInvalid]);
  });

  it("names the signer, not the gateway's name for it, when it refuses a message of another domain", async () => {
    const before = t.bob.trust("alice-assistant")!.score;
    const via = `_at_${"ab".repeat(20)}`;
    const frame = t.gw.deliver("bob-assistant", tampered(notification(t.a, "bob-assistant")), { from: via });
    expect(await rejected(frame.id, via)).toMatch(new RegExp(`^${ErrorCode.SignatureInvalid} `));
    expect(t.errors[0]?.message).toMatch(new RegExp(`^refused ${frame.id} from alice-assistant: `));
    expect(t.bob.trust("alice-assistant")?.score).toBeLessThan(before);
  });

  it("blames the sender the gateway names for a message that does not verify", async () => {
    const before = t.bob.trust("alice-assistant");
    const frame = t.gw.deliver("bob-assistant", tampered(notification(t.a, "bob-assistant")), {
      from: "carol-assistant",
    });
    expect(await rejected(frame.id, "carol-assistant")).toMatch(
      new RegExp(`^${ErrorCode.SignatureInvalid} `),
    );
    expect(t.errors[0]?.message).toMatch(new RegExp(`^refused ${frame.id} from carol-assistant: `));
    expect(t.bob.trust("alice-assistant")).toEqual(before);
  });

  it("names the gateway's sender when a message of another domain carries no headers", async () => {
    const via = `_at_${"cd".repeat(20)}`;
    const envelope = { jsonrpc: "2.0", id: 1, error: { code: -32600, message: "no headers" } };
    const frame = t.gw.deliver("bob-assistant", envelope, { id: newMessageId(), from: via });
    expect(await rejected(frame.id, via)).toMatch(/^-32\d+ /);
    expect(t.errors[0]?.message).toMatch(new RegExp(`^refused ${frame.id} from ${via}: `));
  });

  it("refuses, as an internal error, a message the registry lookup failed for with no status", async () => {
    const carol = t.gw.register("carol-assistant", "carol");
    t.gw.directory.failing = new Error("directory bug");
    const frame = t.gw.deliver("bob-assistant", notification(carol, "bob-assistant"));
    expect(await rejected(frame.id, "carol-assistant")).toBe(`${ErrorCode.InternalError} directory bug`);
    expect(kinds(t.errors)).toEqual(["InternalError"]);
    expect(t.degraded).toEqual([]);
  });

  it("refuses a message from an agent the registry does not know", async () => {
    const stranger = t.gw.register("mallory-assistant", "mallory");
    const frame = t.gw.deliver("bob-assistant", notification(stranger, "bob-assistant"));
    t.gw.directory.getAgent = (id) =>
      id === "mallory-assistant"
        ? Promise.reject(new AcpError("NotFound", "no such agent"))
        : Promise.reject();
    expect(await rejected(frame.id, "mallory-assistant")).toMatch(new RegExp(`^${ErrorCode.UnknownKey} `));
  });

  it("leaves a delivery unsettled when the registry cannot be asked, and takes it when handed over again", async () => {
    const carol = t.gw.register("carol-assistant", "carol");
    t.gw.directory.failing = new GatewayUnreachableError(t.gw.url, new Error("ECONNREFUSED"));
    const message = notification(carol, "bob-assistant");
    const first = t.gw.deliver("bob-assistant", message);
    // Carol's second message, behind it in the chain: once it is refused too, the first is decided.
    t.gw.directory.failing = new AcpError("InternalError", "registry down", { httpStatus: 503 });
    const second = t.gw.deliver("bob-assistant", notification(carol, "bob-assistant"));
    await expect.poll(() => t.degraded.length).toBe(1);
    t.gw.directory.failing = undefined;
    // Handed over again: now the key is found; carol has no handshake, so it waits for one.
    const again = t.gw.deliver("bob-assistant", message, { attempt: 2 });
    await stillHealthy();
    expect(t.errors).toEqual([]);
    const settled = t.gw.sentBy("bob-assistant").filter((f) => [first.id, second.id].includes(String(f.id)));
    expect(settled).toEqual([]);
    expect(again.id).toBe(first.id);
  });

  it("reports as an error, not a passing degradation, a registry failure it meets while closing", async () => {
    const carol = t.gw.register("carol-assistant", "carol");
    const asked = deferred();
    const answer = deferred();
    const getAgent = t.gw.directory.getAgent;
    t.gw.directory.getAgent = async (id) => {
      if (id !== "carol-assistant") return getAgent(id);
      asked.resolve();
      await answer.promise;
      throw new GatewayUnreachableError(t.gw.url, new Error("ECONNRESET"));
    };
    const frame = t.gw.deliver("bob-assistant", notification(carol, "bob-assistant"));
    await asked.promise;
    const closed = t.bob.close();
    answer.resolve();
    await closed;
    expect(t.errors).toMatchObject([{ name: "GatewayUnreachableError" }]);
    expect(t.degraded).toEqual([]);
    expect(t.gw.sentBy("bob-assistant").filter((f) => f.id === frame.id)).toEqual([]);
  });

  it("reports a handshake step whose answer the gateway refused, and only acknowledges its redelivery", async () => {
    t.gw.onSubmit((_envelope, from) =>
      from === "bob-assistant" ? { code: ErrorCode.InvalidParams, message: "refused", data: {} } : "relay",
    );
    const announce = t.gw.deliver(
      "bob-assistant",
      signMessage(buildAnnounce(t.a.sender, "bob-assistant", SCHEDULING_ANNOUNCE), t.a.signer),
    );
    await expect.poll(() => kinds(t.errors)).toEqual(["InvalidParams"]);
    t.gw.deliver("bob-assistant", announce.envelope, { attempt: 2 });
    expect(await t.gw.settled("bob-assistant", announce.id)).toMatchObject({ type: "acknowledge" });
    expect(t.gw.sentBy("bob-assistant").filter((f) => f.id === announce.id)).toHaveLength(1);
  });

  it("refuses the sixth announce within ten seconds, and audits the refused handshake step", async () => {
    t.gw.onSubmit(() => "drop"); // bob's answers do not reach alice: only bob's side is under test
    // The handshake made before the test was the first announce.
    const announces = Array.from({ length: 5 }, () =>
      t.gw.deliver(
        "bob-assistant",
        signMessage(buildAnnounce(t.a.sender, "bob-assistant", SCHEDULING_ANNOUNCE), t.a.signer),
      ),
    );
    for (const announce of announces.slice(0, 4)) {
      expect(await t.gw.settled("bob-assistant", announce.id)).toMatchObject({ type: "acknowledge" });
    }
    expect(await rejected(announces[4]!.id)).toBe(
      `${ErrorCode.Conflict} alice-assistant announced 6 times within 10000 ms; ignored`,
    );
    expect(await refusalsAudited()).toEqual([ErrorCode.Conflict]);
  });
});

describe("an agent whose deliveries its gateway's relay verified still checks where they go", () => {
  const t = useScriptedPair(tmp, () => ({}));

  it("refuses a message signed for another agent even when the relay marked it verified", async () => {
    const keys = new Map([["alice-assistant", importPublicKey(t.a.identity.signing)]]);
    const relayed = t.gw.register("relayed-assistant", "relayed");
    const errors: Error[] = [];
    const agent = await t.connect(relayed, {
      connection: relayVerifiedConnection(t.gw.url, relayed.apiKey, keys),
    });
    agent.on("error", (err) => errors.push(err));
    const frame = t.gw.deliver("relayed-assistant", notification(t.a, "bob-assistant"));
    const settled = await t.gw.settled("relayed-assistant", frame.id);
    expect(settled).toMatchObject({
      type: "reject",
      reason: `${ErrorCode.Misrouted} addressed to bob-assistant, not relayed-assistant`,
    });
    expect(errors[0]).toMatchObject({
      kind: "Misrouted",
      data: { problems: [{ path: "/params/headers/recipient-id", message: "expected relayed-assistant" }] },
    });
  });
});
