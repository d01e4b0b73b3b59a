/**
 * The gateway under attack: `acp gateway` in its own process (so a crash is a real exit and memory
 * a real RSS), with two registered agents that completed the handshake, and a tally of answers.
 */
import fc from "fast-check";
import { buildNotification, signMessage } from "../../../src/protocol/index.js";
import { handshake } from "../../helpers/messaging.js";
import { registerTestAgent, type TestAgent } from "../../helpers/gateway.js";
import { recordFigures } from "./figures.js";
import { FUZZ_RUNS } from "./hostile.js";
import { type GatewayChild, spawnGateway } from "./processes.js";

export interface Target {
  gateway: GatewayChild;
  alpha: TestAgent;
  beta: TestAgent;
  /** A fresh, valid, signed notification alpha → beta. */
  envelope(): Record<string, unknown>;
}

export async function startTarget(data: string, extraArgs: string[] = []): Promise<Target> {
  const gateway = await spawnGateway({ cli: ["--data", data, "--rate-limit", "100000000", ...extraArgs] });
  const alpha = await registerTestAgent(gateway.url, "agent-alpha", "principal-alpha");
  const beta = await registerTestAgent(gateway.url, "agent-beta", "principal-beta");
  await handshake({ url: gateway.url } as Parameters<typeof handshake>[0], alpha, beta);
  return {
    gateway,
    alpha,
    beta,
    envelope: () => signMessage(buildNotification(alpha.sender, "agent-beta", { n: 1 }), alpha.signer),
  };
}

/** Answers per status and the (first 10) answers that were wrong, for one fuzzed surface. */
export class SurfaceTally {
  readonly statuses = new Map<string, number>();
  readonly failures: string[] = [];
  failed = 0;
  runs = 0;

  constructor(readonly surface: string) {}

  record(status: number | string, problem: string | undefined, input: () => string): void {
    this.runs++;
    this.statuses.set(String(status), (this.statuses.get(String(status)) ?? 0) + 1);
    if (!problem) return;
    this.failed++;
    if (this.failures.length < 10) this.failures.push(`${problem}\n    input: ${input().slice(0, 300)}`);
  }

  report(extra: Record<string, number | string | boolean> = {}): void {
    recordFigures(`fuzz-${this.surface}`, {
      runs: this.runs,
      wrongAnswers: this.failed,
      answers: [...this.statuses.entries()]
        .sort()
        .map(([k, v]) => `${k}:${v}`)
        .join(","),
      ...extra,
    });
  }
}

/** Runs `body` on `runs` generated inputs (no shrinking: every run counts, failures are collected). */
export async function fuzz<T>(
  arbitrary: fc.Arbitrary<T>,
  body: (input: T) => Promise<void>,
  runs = FUZZ_RUNS,
): Promise<void> {
  const seed = process.env.ACP_FUZZ_SEED ? Number(process.env.ACP_FUZZ_SEED) : undefined;
  await fc.assert(
    fc.asyncProperty(arbitrary, async (input) => {
      await body(input);
    }),
    { numRuns: runs, endOnFailure: true, ...(seed === undefined ? {} : { seed }) },
  );
}

/** The per-test timeout for `FUZZ_RUNS` runs of a few milliseconds each. */
export const FUZZ_TIMEOUT_MS = 60_000 + FUZZ_RUNS * 30;
