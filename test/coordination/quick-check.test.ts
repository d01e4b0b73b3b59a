/**
 * The quick checks (src/coordination/quick-check.ts) stand in for the zod schemas on the CLI's hot
 * path, so each must never accept what its schema refuses, must return exactly what its schema
 * would, and must accept what agents usually write (or the hot path would load zod after all).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  checkFormat,
  quickAgentEntry,
  quickCoordination,
  quickEvent,
  quickLockOwner,
} from "../../src/coordination/quick-check.js";
import {
  AgentEntrySchema,
  CoordinationSchema,
  LockOwnerSchema,
  SessionEventSchema,
} from "../../src/coordination/schemas.js";

const timestamp = fc.oneof(
  fc.date({ min: new Date(0), max: new Date("2100-01-01"), noInvalidDate: true }).map((d) => d.toISOString()),
  fc
    .date({ min: new Date(0), max: new Date("2100-01-01"), noInvalidDate: true })
    .map((d) => d.toISOString().replace(/\.\d+Z$/, "+02:00")),
  fc.constantFrom(
    "2024-02-29T23:59:59Z",
    "2023-02-29T00:00:00Z",
    "2025-01-23T24:00:00Z",
    "2025-01-23T10:00Z",
    "2025-01-23 10:00:00Z",
    "2025-01-23T10:00:00",
    "2025-01-23T10:00:00.5-23:59",
    "2025-01-23T10:00:00+24:00",
    "",
  ),
);
const name = fc.oneof(
  fc.constantFrom(
    "alpha",
    "a.b_c-1",
    "A9",
    ".hidden",
    "",
    "x/y",
    "__proto__",
    "constructor",
    "a".repeat(129),
  ),
  fc.string({ maxLength: 12 }),
);
const text = fc.oneof(fc.constantFrom("", "working", "50%"), fc.string({ maxLength: 8 }));
const integer = fc.oneof(fc.integer(), fc.constantFrom(-1, 0, 1.5, 2 ** 60, Number.NaN));
/** Any value at all, sometimes: a field of the wrong type. */
const junk = fc.anything({ maxDepth: 2 });
const maybe = <T>(arbitrary: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 4, arbitrary }, { weight: 1, arbitrary: junk });
const extraFields = fc.dictionary(fc.constantFrom("custom", "x", "__proto__", "toString", "count"), junk, {
  maxKeys: 2,
});
/** An object with any subset of `fields` (each sometimes of the wrong type) and maybe fields of its own. */
const objectOf = (fields: Record<string, fc.Arbitrary<unknown>>) =>
  fc
    .tuple(
      fc.record(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, maybe(v)])), {
        requiredKeys: [],
      }),
      extraFields,
    )
    .map(([known, extra]) => ({ ...extra, ...known }));

const agentEntry = objectOf({
  status: fc.constantFrom("waiting", "in_progress", "completed", "failed", "done"),
  started_at: timestamp,
  completed_at: timestamp,
  report_path: text,
  dependencies: fc.array(name, { maxLength: 3 }),
  progress: text,
  error: text,
  exit_code: fc.oneof(integer, fc.constant(null)),
  attempts: integer,
});
const coordination = objectOf({
  session_id: fc.oneof(fc.uuid(), name),
  started_at: timestamp,
  project_type: text,
  agents: fc.dictionary(name, agentEntry, { maxKeys: 3 }),
});
const event = objectOf({
  timestamp,
  from: name,
  type: fc.constantFrom("status", "finding", "error", "data", "completed", "other"),
  message: text,
  severity: fc.constantFrom("high", "medium", "low", "urgent"),
  artifact: text,
  description: text,
  error: text,
  data: fc.oneof(
    fc.constant({ title: "t" }),
    fc.dictionary(fc.string({ maxLength: 4 }), junk, { maxKeys: 2 }),
  ),
});
const lockOwner = objectOf({ pid: integer, host: text, time: timestamp, token: text });

/** Whatever the quick check accepts, the schema accepts, and gives the same value, field order included. */
function agreesWithSchema(quick: (value: unknown) => unknown, schema: z.ZodType) {
  return (value: unknown) => {
    const fast = quick(value);
    if (fast === undefined) return;
    const slow = schema.safeParse(value);
    expect(slow.success, JSON.stringify(value)).toBe(true);
    expect(JSON.stringify(fast)).toBe(JSON.stringify(slow.data));
    expect(fast).toEqual(slow.data);
  };
}

describe("quick checks never accept what the schema refuses, and return what it would", () => {
  const runs = { numRuns: 3000 };
  it("agent entries", () => {
    fc.assert(fc.property(agentEntry, agreesWithSchema(quickAgentEntry, AgentEntrySchema)), runs);
  });
  it("coordination.json", () => {
    fc.assert(fc.property(coordination, agreesWithSchema(quickCoordination, CoordinationSchema)), runs);
  });
  it("events", () => {
    fc.assert(fc.property(event, agreesWithSchema(quickEvent, SessionEventSchema)), runs);
  });
  it("lock owners", () => {
    fc.assert(fc.property(lockOwner, agreesWithSchema(quickLockOwner, LockOwnerSchema)), runs);
  });
});

describe("quick checks decide what agents usually write", () => {
  const now = new Date().toISOString();
  it("accepts our own events and the protocol's shell-written ones", () => {
    for (const value of [
      { timestamp: now, from: "alpha", type: "status", message: "working" },
      {
        timestamp: "2025-01-23T10:00:00Z",
        from: "security-analyzer",
        type: "finding",
        severity: "high",
        data: { title: "SQLi" },
      },
      {
        timestamp: "2025-01-23T10:00:00+01:00",
        from: "a",
        type: "data",
        artifact: "data/x.json",
        description: "d",
      },
      { timestamp: now, from: "a", type: "error", message: "boom", error: "trace", custom: [1] },
      { timestamp: now, from: "a", type: "completed", message: "done" },
    ]) {
      expect(quickEvent(value), JSON.stringify(value)).toBeDefined();
    }
  });

  it("accepts coordination.json as we and the protocol's jq recipes write it", () => {
    const file = {
      session_id: "abc123",
      started_at: "2025-01-23T10:00:00Z",
      project_type: "web",
      agents: {
        alpha: {
          status: "completed",
          started_at: now,
          completed_at: now,
          report_path: "reports/alpha.json",
          dependencies: [],
        },
        beta: { status: "waiting", dependencies: ["alpha"], reason: "waiting for alpha" },
        gamma: {
          status: "failed",
          failed_at: now,
          error: "x",
          exit_code: null,
          signal: "SIGKILL",
          attempts: 2,
        },
      },
    };
    expect(quickCoordination(file)).toEqual(CoordinationSchema.parse(file));
  });

  it("leaves an invalid value to the schema, which names what is wrong", async () => {
    const bad = { timestamp: now, from: "alpha", type: "finding" };
    expect(quickEvent(bad)).toBeUndefined();
    await expect(checkFormat("SessionEventSchema", bad, { file: "event" })).rejects.toThrow(
      /^event: severity: required field is missing/,
    );
  });
});
