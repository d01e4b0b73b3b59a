/**
 * Fuzzing the WebSocket (`/api/v1/ws`) with fast-check: generated frames and mutations of every
 * valid frame type, as text and as binary. The gateway must never crash or drop the connection
 * over a bad frame, must answer every `submit` exactly once (by its ref), and every `error` frame
 * must carry a documented code. Before authenticating, garbage must get 4401 and nothing else.
 * `ACP_FUZZ_RUNS` sets the runs (CI: 400; the long run: 100000).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { ServerFrame } from "../../src/gateway/index.js";
import { ErrorCode, signMessage } from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import {
  badError,
  deeplyNested,
  FUZZ_RUNS,
  hostileValue,
  mutate,
  mutationOf,
  nastyString,
} from "./support/hostile.js";
import { memoryOf, sleep } from "./support/processes.js";
import { FUZZ_TIMEOUT_MS, fuzz, SurfaceTally, startTarget, type Target } from "./support/target.js";

type Outgoing = { text: string; ref?: string } | { binary: Uint8Array };

/** An authenticated socket that checks every frame it receives as it arrives. */
class CheckedSocket {
  readonly answeredRefs = new Map<string, number>();
  readonly problems: string[] = [];
  closed: { code: number; reason: string } | undefined;
  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as ServerFrame;
      if (frame.type === "error") {
        const problem = badError(frame.error);
        if (problem && this.problems.length < 10) this.problems.push(problem);
      }
      if ((frame.type === "error" || frame.type === "submitted") && typeof frame.ref === "string") {
        this.answeredRefs.set(frame.ref, (this.answeredRefs.get(frame.ref) ?? 0) + 1);
      }
    });
    ws.on("close", (code, reason) => {
      this.closed = { code, reason: reason.toString() };
    });
  }

  static async open(url: string, apiKey: string): Promise<CheckedSocket> {
    const ws = new WebSocket(url, { headers: { "x-api-key": apiKey } });
    const socket = new CheckedSocket(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once("message", () => resolve()); // `ready`
      ws.once("error", reject);
    });
    return socket;
  }

  /** Sends a frame, then pings: the pong comes after the gateway read the frame. */
  async send(frame: Outgoing): Promise<void> {
    if ("text" in frame) this.ws.send(frame.text);
    else this.ws.send(frame.binary, { binary: true });
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 5_000);
      this.ws.once("pong", () => {
        clearTimeout(timer);
        resolve();
      });
      this.ws.ping();
    });
  }
}

describe("fuzzing the WebSocket frames", () => {
  const tmp = useTmpDir("acp-rel-fuzzws-");
  let target: Target;
  beforeAll(async () => {
    target = await startTarget(tmp());
  });
  afterAll(async () => {
    await target.gateway.stop();
  });

  it(
    "answers bad frames with documented errors, every submit once, and keeps the connection",
    async () => {
      const tally = new SurfaceTally("websocket");
      const socket = await CheckedSocket.open(target.gateway.wsUrl, target.alpha.apiKey);
      let refs = 0;
      const submitFrame = (envelope: unknown) => {
        const ref = `fuzz-${refs++}`;
        return { text: JSON.stringify({ type: "submit", ref, envelope }), ref };
      };
      const valid: Record<string, unknown>[] = [
        { type: "acknowledge", id: "00000000-0000-4000-8000-000000000000", from: "agent-beta" },
        { type: "reject", id: "00000000-0000-4000-8000-000000000000", from: "agent-beta", reason: "no" },
        { type: "presence", presence: { state: "busy", load: 5, tasks: [{ id: "t" }] } },
        { type: "heartbeat" },
        { type: "auth", apiKey: "acp_x" },
      ];
      const envelope = target.envelope();
      const frames: fc.Arbitrary<Outgoing> = fc.oneof(
        // submit frames whose envelope is mutated (re-signed or not), or deeply nested
        {
          weight: 4,
          arbitrary: fc.record({ m: mutationOf(envelope), resign: fc.boolean() }).map(({ m, resign }) => {
            const changed = mutate(target.envelope(), m) as Record<string, unknown> | undefined;
            if (!resign || typeof changed !== "object" || changed === null) return submitFrame(changed);
            const { signature: _old, ...unsigned } = changed;
            try {
              return submitFrame(signMessage(unsigned as never, target.alpha.signer));
            } catch {
              return submitFrame(changed);
            }
          }),
        },
        {
          weight: 1,
          arbitrary: fc.integer({ min: 100, max: 50_000 }).map((depth) => {
            const ref = `fuzz-${refs++}`;
            const text = JSON.stringify({ type: "submit", ref, envelope: target.envelope() }).replace(
              '"body":{"n":1}',
              `"body":{"n":${deeplyNested(depth)}}`,
            );
            return { text, ref };
          }),
        },
        // the other frame types, mutated
        {
          weight: 3,
          arbitrary: fc
            .constantFrom(...valid)
            .chain((frame) =>
              mutationOf(frame).map((m) => ({ text: JSON.stringify(mutate(frame, m)) ?? "" })),
            ),
        },
        { weight: 1, arbitrary: hostileValue.map((v) => ({ text: JSON.stringify(v) ?? "" })) },
        { weight: 1, arbitrary: nastyString.map((text) => ({ text })) },
        { weight: 1, arbitrary: fc.uint8Array({ maxLength: 512 }).map((binary) => ({ binary })) },
      );
      const submitted = new Set<string>();
      await fuzz(frames, async (frame) => {
        if ("ref" in frame && frame.ref) submitted.add(frame.ref);
        await socket.send(frame);
        tally.record(
          socket.closed ? `closed-${socket.closed.code}` : "open",
          socket.closed ? "the gateway closed the socket" : undefined,
          () => ("text" in frame ? frame.text : `binary ${frame.binary.length} bytes`),
        );
        if (socket.closed) throw new Error(`closed: ${JSON.stringify(socket.closed)}`);
      });
      // Every submit is answered exactly once (bounded wait for the slowest).
      for (let i = 0; i < 100 && [...submitted].some((ref) => !socket.answeredRefs.has(ref)); i++)
        await sleep(100);
      const unanswered = [...submitted].filter((ref) => !socket.answeredRefs.has(ref)).length;
      const twice = [...socket.answeredRefs.values()].filter((n) => n > 1).length;
      tally.report({
        submits: submitted.size,
        unanswered,
        answeredTwice: twice,
        undocumentedErrors: socket.problems.length,
        gatewayAlive: target.gateway.child.exitCode === null,
        ...memoryOf(target.gateway.pid),
      });

      expect(tally.failures).toEqual([]);
      expect(socket.problems).toEqual([]);
      expect(unanswered).toBe(0);
      expect(twice).toBe(0);
      // Still serving: a valid submit on the same socket is accepted.
      const last = submitFrame(target.envelope());
      await socket.send(last);
      for (let i = 0; i < 50 && !socket.answeredRefs.has(last.ref); i++) await sleep(100);
      expect(socket.answeredRefs.get(last.ref)).toBe(1);
      socket.ws.close();
    },
    FUZZ_TIMEOUT_MS,
  );

  it("answers a malformed submit frame by its ref, so the sender is not left waiting", async () => {
    const socket = await CheckedSocket.open(target.gateway.wsUrl, target.alpha.apiKey);
    const errors: Array<{ ref?: unknown; code: number }> = [];
    socket.ws.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as ServerFrame;
      if (frame.type === "error") errors.push({ ref: frame.ref, code: frame.error.code });
    });
    for (const frame of [
      { type: "submit", ref: "not-an-object", envelope: "text" },
      { type: "submit", ref: 7, envelope: [1, 2] },
      { type: "submit", ref: "extra-field", envelope: {}, extra: true },
    ]) {
      await socket.send({ text: JSON.stringify(frame) });
    }
    await socket.send({ text: '{"type":"submit","ref":"no-envelope"}' });
    for (let i = 0; i < 50 && errors.length < 4; i++) await sleep(50);
    socket.ws.close();
    expect(errors).toEqual([
      { ref: "not-an-object", code: ErrorCode.InvalidRequest },
      { ref: 7, code: ErrorCode.InvalidRequest },
      { ref: "extra-field", code: ErrorCode.InvalidRequest },
      { ref: "no-envelope", code: ErrorCode.InvalidRequest },
    ]);
  });

  it(
    "closes an unauthenticated socket with 4401 whatever its first frame",
    async () => {
      const tally = new SurfaceTally("websocket-unauthenticated");
      // Each wrong key is a failed credential check from this test's address; past the limiter's
      // burst (20 by default) the address is throttled, and 4429 is then the right answer.
      const throttleBurst = 20;
      let wrongKeys = 0;
      const first = fc.oneof(
        fc.record({ type: fc.constant("auth"), apiKey: nastyString }).map((f) => JSON.stringify(f)),
        hostileValue.map((v) => JSON.stringify(v) ?? ""),
        nastyString,
      );
      // Each run opens a socket: a tenth of the runs keeps this surface as quick as the others.
      await fuzz(
        first,
        async (text) => {
          const ws = new WebSocket(target.gateway.wsUrl);
          const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
          ws.once("open", () => ws.send(text));
          ws.on("error", () => undefined);
          if (presentsKey(text)) wrongKeys++;
          const code = await Promise.race([closed, sleep(15_000).then(() => -1)]);
          const throttled = code === 4429 && wrongKeys > throttleBurst;
          tally.record(code, code === 4401 || throttled ? undefined : `closed with ${code}`, () => text);
        },
        Math.max(20, Math.ceil(FUZZ_RUNS / 10)),
      );
      tally.report({ gatewayAlive: target.gateway.child.exitCode === null });
      expect(tally.failures).toEqual([]);
    },
    FUZZ_TIMEOUT_MS,
  );
});

/** Whether a first frame is an `auth` frame with a key the gateway will look up. */
function presentsKey(text: string): boolean {
  try {
    const frame = JSON.parse(text) as { type?: unknown; apiKey?: unknown };
    return frame.type === "auth" && typeof frame.apiKey === "string" && frame.apiKey.length > 0;
  } catch {
    return false;
  }
}
