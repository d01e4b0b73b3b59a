/**
 * Protocol core throughput: sign, verify, validate and the full receive check
 * (verifyEnvelope = validate + verify) of a ~1 KB signed request, beside node:crypto's raw Ed25519
 * verify of the very same signing input, which is the ceiling any verifier can reach. The target:
 * validate + verify at or above 80% of raw verify.
 *
 * Method: rates are per second of this process's CPU time (process.cpuUsage), so other processes on
 * the machine do not distort them. Each case runs for a slice after a warm-up, between two slices of
 * raw verify. Several rounds; the table gives each case's best round (least disturbed) against raw
 * verify's best round, and the median of its ratios to the raw slices around it.
 * BENCH_SLICE_MS and BENCH_ROUNDS tune it.
 */
import { verify as edVerify, generateKeyPairSync } from "node:crypto";
import {
  buildRequest,
  canonicalize,
  createSigner,
  generateIdentity,
  importPublicKey,
  type KeyResolver,
  signingInput,
  signMessage,
  validateMessage,
  verifyEnvelope,
  verifyMessageSignature,
} from "../../src/protocol/index.js";

const SLICE_MS = Number(process.env.BENCH_SLICE_MS ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);
const TARGET_RATIO = 0.8;

const alpha = generateIdentity("agent-alpha", "principal-a", new Date("2026-02-14T14:30:00Z"));
const signer = createSigner(alpha);
const alphaKey = importPublicKey(alpha.signing);
const resolveKey: KeyResolver = (agentId, kid) =>
  agentId === alpha.agentId && kid === signer.kid ? alphaKey : undefined;

/** A request whose wire form is about 1 KB: the ACP core protocol's availability query with a realistic payload. */
function oneKilobyteRequest() {
  const body = {
    action: "get-availability",
    parameters: {
      date_range: "2026-02-17/2026-02-21",
      duration_minutes: 60,
      attendees: ["principal-a", "principal-b", "principal-c"],
      time_zone: "Europe/Berlin",
      preferences: { earliest: "09:00", latest: "17:30", avoid: ["lunch", "Friday afternoon"] },
      note: "",
    },
  };
  const request = buildRequest(
    { agentId: alpha.agentId, principalId: alpha.principalId, layers: [0, 1, 2, 3] },
    "agent-beta",
    body,
    { now: new Date("2026-02-14T14:30:00Z"), messageId: "7d5f6a8e-3b1c-4f2a-9e0d-1c2b3a4d5e6f" },
  );
  const size = () => Buffer.byteLength(JSON.stringify(signMessage(request, signer)));
  body.parameters.note = "x".repeat(Math.max(0, 1024 - size()));
  return request;
}

const unsigned = oneKilobyteRequest();
const signed = signMessage(unsigned, signer);
const wireText = JSON.stringify(signed);
const input = signingInput(signer.protectedB64, signed);
const sigBytes = Buffer.from(signed.signature.split("..")[1] ?? "", "base64url");
const otherKey = generateKeyPairSync("ed25519").publicKey;
if (!edVerify(null, input, alphaKey, sigBytes) || edVerify(null, input, otherKey, sigBytes)) {
  throw new Error("benchmark set-up is wrong: the raw verify does not discriminate keys");
}

let sink = 0;
const cases: Record<string, () => void> = {
  "raw Ed25519 verify (limit)": () => {
    if (edVerify(null, input, alphaKey, sigBytes)) sink++;
  },
  "canonicalize (JCS)": () => {
    sink += canonicalize(signed).length;
  },
  "validate (zod, envelope rules)": () => {
    if (validateMessage(signed, { envelope: true })) sink++;
  },
  "sign (JCS + Ed25519)": () => {
    sink += signMessage(unsigned, signer).signature.length;
  },
  "verify (JCS + Ed25519)": () => {
    sink += verifyMessageSignature(signed, resolveKey).length;
  },
  "validate + verify (verifyEnvelope)": () => {
    sink += verifyEnvelope(signed, { resolveKey }).kid.length;
  },
  "JSON.parse + validate + verify": () => {
    sink += verifyEnvelope(wireText, { resolveKey }).kid.length;
  },
};

/** Operations per second of this process's CPU time: other processes' load does not count. */
function opsPerSecond(run: () => void, sliceMs: number): number {
  let ops = 0;
  const start = process.cpuUsage();
  const budget = sliceMs * 1000;
  let used = 0;
  while (used < budget) {
    for (let i = 0; i < 20; i++) run();
    ops += 20;
    const { user, system } = process.cpuUsage(start);
    used = user + system;
  }
  return ops / (used / 1e6);
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

console.log(
  `message: ${Buffer.byteLength(wireText)} bytes on the wire (signed request); ${ROUNDS} rounds x ` +
    `${SLICE_MS} ms of CPU per case (rates are per CPU-second of this process)`,
);
for (const run of Object.values(cases)) opsPerSecond(run, 200); // warm-up: let V8 optimise every path

// Other processes share the machine, so absolute rates drift; ratios are taken within one round,
// against the mean of the raw verify rates measured just before and just after the case.
const RAW = "raw Ed25519 verify (limit)";
const rates = new Map<string, number[]>(Object.keys(cases).map((name) => [name, []]));
const ratios = new Map<string, number[]>(Object.keys(cases).map((name) => [name, []]));
const rawCase = cases[RAW] ?? (() => {});
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, run] of Object.entries(cases)) {
    const before = opsPerSecond(rawCase, SLICE_MS);
    const rate = opsPerSecond(run, SLICE_MS);
    const after = opsPerSecond(rawCase, SLICE_MS);
    rates.get(name)?.push(rate);
    ratios.get(name)?.push(rate / ((before + after) / 2));
  }
}

const best = (values: number[]) => Math.max(...values);
const rawBest = best(rates.get(RAW) ?? [1]);
const rows = [...rates].map(([name, values]) => ({
  operation: name,
  "ops/s (best round)": Math.round(best(values)).toLocaleString("en-US"),
  "µs/op": (1e6 / best(values)).toFixed(2),
  "vs raw verify (best)": `${((best(values) / rawBest) * 100).toFixed(1)}%`,
  "vs raw verify (median of paired)": `${(median(ratios.get(name) ?? []) * 100).toFixed(1)}%`,
}));
console.table(rows);

const PIPELINE = "validate + verify (verifyEnvelope)";
const bestRatio = best(rates.get(PIPELINE) ?? [0]) / rawBest;
const pairedRatio = median(ratios.get(PIPELINE) ?? []);
const verdict = (ratio: number) => (ratio >= TARGET_RATIO ? "meets" : "MISSES");
console.log(
  `validate + verify / raw Ed25519 verify: ${(bestRatio * 100).toFixed(1)}% best rounds ` +
    `(${verdict(bestRatio)} the issue's floor of ${TARGET_RATIO * 100}%), ` +
    `${(pairedRatio * 100).toFixed(1)}% median of paired rounds (${verdict(pairedRatio)} it)`,
);
console.log(
  "Best rounds are the least disturbed by other processes (the usual min-time estimator); on a busy " +
    "machine the paired median also carries their cache and scheduling interference.",
);
if (sink === -1) console.log("unreachable; keeps results alive");
process.exitCode = bestRatio >= TARGET_RATIO ? 0 : 1;
