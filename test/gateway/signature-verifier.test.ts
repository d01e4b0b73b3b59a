import { generateKeyPairSync } from "node:crypto";
import { Worker } from "node:worker_threads";
import { describe, expect, it, vi } from "vitest";
import { SignatureVerifier } from "../../src/gateway/signature-verifier.js";
import {
  type AcpError,
  type AcpMessage,
  type KeyResolver,
  buildRequest,
  createSigner,
  ErrorCode,
  signMessage,
  verifyMessageSignature,
} from "../../src/protocol/index.js";
import {
  alpha,
  alphaSigner,
  beta,
  betaSigner,
  fixedIdentity,
  keyRing,
  mutated,
  senderOf,
} from "../protocol/fixtures.js";

const ring = keyRing(alpha, beta);
const NOW = new Date("2026-02-14T14:30:00Z");
const signedRequest = (n: number, from = alpha, signer = alphaSigner) =>
  signMessage(
    buildRequest(
      senderOf(from),
      "agent-beta",
      { action: "get-availability", n },
      { now: NOW, messageId: `msg-${n}` },
    ),
    signer,
  );

type Outcome = { kid: string } | { code: number; message: string };

async function outcome(run: () => string | Promise<string>): Promise<Outcome> {
  try {
    return { kid: await run() };
  } catch (err) {
    return { code: (err as AcpError).code, message: (err as AcpError).message };
  }
}

describe("SignatureVerifier (the gateway's verify thread)", () => {
  const signed = signedRequest(1);
  const other = fixedIdentity("agent-alpha", "principal-a", "alpha-second-key");
  const cases: AcpMessage[] = [
    signed,
    mutated(signed, (m) => (m.params.body.action = "changed")),
    { ...signed, signature: `${alphaSigner.protectedB64}..${Buffer.alloc(64, 7).toString("base64url")}` },
    signMessage(signedRequest(2), createSigner(other)),
    signedRequest(3, alpha, betaSigner),
    { ...signed, signature: undefined } as unknown as AcpMessage,
    signedRequest(4, beta, betaSigner),
  ];

  it("gives the synchronous verify's answers, asked one turn at a time and all in one batch", async () => {
    const verifier = new SignatureVerifier();
    try {
      const expected = await Promise.all(cases.map((m) => outcome(() => verifyMessageSignature(m, ring))));
      expect(expected.map((o) => ("kid" in o ? o.kid : o.code))).toEqual([
        alphaSigner.kid,
        ErrorCode.SignatureInvalid,
        ErrorCode.SignatureInvalid,
        ErrorCode.UnknownKey,
        ErrorCode.SignatureInvalid,
        ErrorCode.SignatureMissing,
        betaSigner.kid,
      ]);
      const oneByOne: Outcome[] = [];
      for (const message of cases) oneByOne.push(await outcome(() => verifier.verify(message, ring)));
      expect(oneByOne).toEqual(expected);
      const batched = await Promise.all(cases.map((m) => outcome(() => verifier.verify(m, ring))));
      expect(batched).toEqual(expected);
    } finally {
      await verifier.close();
    }
  });

  it("keeps each answer with its own message in a large batch of good and tampered signatures", async () => {
    const verifier = new SignatureVerifier();
    try {
      const messages = Array.from({ length: 300 }, (_, i) => {
        const message = i % 3 === 1 ? signedRequest(i, beta, betaSigner) : signedRequest(i);
        return i % 7 === 3 ? mutated(message, (m) => (m.params.body.n = -1)) : message;
      });
      const answers = await Promise.all(messages.map((m) => outcome(() => verifier.verify(m, ring))));
      const expected = messages.map((_, i) =>
        i % 7 === 3 ? ErrorCode.SignatureInvalid : i % 3 === 1 ? betaSigner.kid : alphaSigner.kid,
      );
      expect(answers.map((o) => ("kid" in o ? o.kid : o.code))).toEqual(expected);
    } finally {
      await verifier.close();
    }
  });

  it("sends a batch to the verify thread once it holds 8 verifies, the rest at the end of the turn", async () => {
    const verifier = new SignatureVerifier();
    const posted = vi.spyOn(Worker.prototype, "postMessage");
    try {
      const messages = Array.from({ length: 20 }, (_, i) =>
        i === 9 ? mutated(signedRequest(i), (m) => (m.params.body.n = -1)) : signedRequest(i),
      );
      const answers = messages.map((m) => outcome(() => verifier.verify(m, ring)));
      // Still in the turn that asked: two full batches have left, the last four wait for its end.
      const sizes = () =>
        posted.mock.calls.map(([data]) => (data as { offsets: number[] }).offsets.length / 4);
      expect(sizes()).toEqual([8, 8]);
      const kids = (await Promise.all(answers)).map((o) => ("kid" in o ? o.kid : o.code));
      expect(sizes()).toEqual([8, 8, 4]);
      // All to the verifier's one thread.
      expect(new Set(posted.mock.contexts).size).toBe(1);
      expect(kids).toEqual(messages.map((_, i) => (i === 9 ? ErrorCode.SignatureInvalid : alphaSigner.kid)));
    } finally {
      posted.mockRestore();
      await verifier.close();
    }
  });

  it("verifies one asked for alone in its turn on the event loop, answered by the turn's end", async () => {
    const verifier = new SignatureVerifier();
    const posted = vi.spyOn(Worker.prototype, "postMessage");
    try {
      for (const message of [signedRequest(1), mutated(signedRequest(2), (m) => (m.params.body.n = -1))]) {
        let answer: Outcome | undefined;
        void outcome(() => verifier.verify(message, ring)).then((o) => (answer = o));
        // The verifier's end-of-turn flush was scheduled first, so it has run when this one does;
        // a verify handed to another thread could not have answered yet.
        await new Promise((resolve) => setImmediate(resolve));
        expect(answer).toEqual(await outcome(() => verifyMessageSignature(message, ring)));
      }
      expect(posted).not.toHaveBeenCalled();
    } finally {
      posted.mockRestore();
      await verifier.close();
    }
  });

  it("close lets the verifies under way finish, then refuses new ones", async () => {
    const verifier = new SignatureVerifier();
    const underWay = Array.from({ length: 20 }, (_, i) => verifier.verify(signedRequest(i), ring));
    await verifier.close();
    expect(await Promise.all(underWay)).toEqual(Array(20).fill(alphaSigner.kid));
    await expect(verifier.verify(signed, ring)).rejects.toThrow("the signature verifier is closed");
  });
  it("refuses by name a registered key that cannot verify Ed25519, alone in its turn and in a batch", async () => {
    const verifier = new SignatureVerifier();
    const x25519 = generateKeyPairSync("x25519").publicKey;
    const wrongType: KeyResolver = (agentId, kid) =>
      agentId === "agent-alpha" ? x25519 : ring(agentId, kid);
    const unusable = `the registered key ${alphaSigner.kid} cannot verify Ed25519 signatures`;
    try {
      await expect(outcome(() => verifier.verify(signedRequest(1), wrongType))).resolves.toMatchObject({
        message: unusable,
      });
      const batch = [signedRequest(2), signedRequest(3, beta, betaSigner), signedRequest(4)];
      const answers = await Promise.all(batch.map((m) => outcome(() => verifier.verify(m, wrongType))));
      expect(answers).toMatchObject([{ message: unusable }, { kid: betaSigner.kid }, { message: unusable }]);
    } finally {
      await verifier.close();
    }
  });

  it("fails the verifies a thread held when it dies, and starts a new thread for the next batch", async () => {
    const verifier = new SignatureVerifier();
    const posted = vi.spyOn(Worker.prototype, "postMessage");
    try {
      const held = Array.from({ length: 8 }, (_, i) =>
        outcome(() => verifier.verify(signedRequest(i), ring)),
      );
      // The full batch left at once; its thread is still starting when it is stopped.
      const thread = posted.mock.contexts[0] as Worker;
      await thread.terminate();
      for (const answer of await Promise.all(held))
        expect(answer).toMatchObject({ message: /the verify thread exited/ });
      const next = Array.from({ length: 8 }, (_, i) => verifier.verify(signedRequest(i), ring));
      expect(await Promise.all(next)).toEqual(Array(8).fill(alphaSigner.kid));
      expect(posted.mock.contexts[1]).not.toBe(thread);
    } finally {
      posted.mockRestore();
      await verifier.close();
    }
  });
});
