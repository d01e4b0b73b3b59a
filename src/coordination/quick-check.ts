/**
 * Quick checks of the formats an agent's every `acp session log` and `acp session update` touches
 * (an event, coordination.json, the lock owner), written by hand so that those commands need not
 * load zod, which alone costs more start-up time than the rest of the command. Each returns exactly
 * what its zod schema in schemas.ts would (known fields in the schema's order, defaults filled in,
 * unknown fields kept after them), or `undefined` to leave the value to the schema: for anything
 * invalid, and for anything unusual it does not bother with. The schema stays the definition of
 * each format and the source of every error message (see `checkFormat`); test/coordination/
 * quick-check.test.ts holds each quick check to its schema.
 */
import type { z } from "zod";
import type { AgentEntry, Coordination, LockOwner, SessionEvent } from "./schemas.js";
import { validateWith } from "./validate.js";
import { AGENT_STATUSES, NAME_PATTERN, SESSION_ID_PATTERN, SEVERITIES } from "./vocabulary.js";

/** zod's `z.iso.datetime({ offset: true })` pattern: a valid date, seconds, an optional fraction, Z or ±hh:mm. */
const ISO_TIMESTAMP =
  /^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$/;

type Fields = Record<string, unknown>;
/** A field check: true when the value is valid. Only called for fields that are present. */
type FieldCheck = (value: unknown) => boolean;

const isString: FieldCheck = (v) => typeof v === "string";
const isText: FieldCheck = (v) => typeof v === "string" && v.length > 0;
const isTimestamp: FieldCheck = (v) => typeof v === "string" && ISO_TIMESTAMP.test(v);
const isName: FieldCheck = (v) => typeof v === "string" && NAME_PATTERN.test(v);
const isInteger: FieldCheck = (v) => Number.isSafeInteger(v);
const oneOf =
  (values: readonly string[]): FieldCheck =>
  (v) =>
    typeof v === "string" && values.includes(v);

/** A plain object (what JSON.parse makes) whose own keys are all safe to copy by assignment. */
function plainFields(value: unknown): Fields | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return undefined;
  for (const key in value) if (key === "__proto__" || (value as Fields)[key] === undefined) return undefined;
  return value as Fields;
}

/**
 * A loose object: each known field present is valid and required ones are there; the copy lists
 * the known fields in the schema's order (a default standing in for a missing one), then the rest.
 */
function looseObject(
  value: unknown,
  shape: Record<string, FieldCheck>,
  required: readonly string[],
  defaults: Record<string, () => unknown> = {},
  copy: Record<string, (value: unknown) => unknown> = {},
): Fields | undefined {
  const fields = plainFields(value);
  if (fields === undefined) return undefined;
  const out: Fields = {};
  for (const [key, check] of Object.entries(shape)) {
    if (!Object.hasOwn(fields, key)) {
      if (required.includes(key)) return undefined;
      const fallback = defaults[key];
      if (fallback) out[key] = fallback();
      continue;
    }
    const field = fields[key];
    if (!check(field)) return undefined;
    out[key] = copy[key] ? copy[key](field) : field;
  }
  for (const key in fields) if (!Object.hasOwn(shape, key)) out[key] = fields[key];
  return out;
}

/** `z.record(z.string(), z.unknown())`: a plain object, copied. */
const isJsonObject: FieldCheck = (v) => plainFields(v) !== undefined;
const copyObject = (v: unknown) => ({ ...(v as Fields) });
const isNameList: FieldCheck = (v) => Array.isArray(v) && v.every(isName);
const copyList = (v: unknown) => [...(v as unknown[])];

const AGENT_ENTRY: Record<string, FieldCheck> = {
  status: oneOf(AGENT_STATUSES),
  started_at: isTimestamp,
  completed_at: isTimestamp,
  failed_at: isTimestamp,
  report_path: isString,
  dependencies: isNameList,
  progress: isString,
  reason: isString,
  error: isString,
  exit_code: (v) => v === null || isInteger(v),
  signal: isString,
  stderr_tail: isString,
  attempts: (v) => isInteger(v) && (v as number) >= 0,
};

export function quickAgentEntry(value: unknown): AgentEntry | undefined {
  return looseObject(
    value,
    AGENT_ENTRY,
    ["status"],
    { dependencies: () => [] },
    { dependencies: copyList },
  ) as AgentEntry | undefined;
}

function quickAgents(value: unknown): Record<string, AgentEntry> | undefined {
  const entries = plainFields(value);
  if (entries === undefined) return undefined;
  const agents: Record<string, AgentEntry> = {};
  for (const name in entries) {
    const entry = isName(name) ? quickAgentEntry(entries[name]) : undefined;
    if (entry === undefined) return undefined;
    agents[name] = entry;
  }
  return agents;
}

export function quickCoordination(value: unknown): Coordination | undefined {
  const fields = plainFields(value);
  if (fields === undefined) return undefined;
  const agents = Object.hasOwn(fields, "agents") ? quickAgents(fields["agents"]) : {};
  if (agents === undefined) return undefined;
  const checked = looseObject(
    value,
    {
      session_id: (v) => typeof v === "string" && SESSION_ID_PATTERN.test(v),
      started_at: isTimestamp,
      project_type: isString,
      project_path: isString,
      agents: () => true,
    },
    ["session_id", "started_at"],
    { agents: () => agents },
    { agents: () => agents },
  );
  return checked as Coordination | undefined;
}

const EVENT_BASE: Record<string, FieldCheck> = { timestamp: isTimestamp, from: isName, data: isJsonObject };
const EVENT_SHAPES: Record<string, { shape: Record<string, FieldCheck>; required: string[] }> = {
  status: { shape: { message: isText }, required: ["message"] },
  finding: { shape: { severity: oneOf(SEVERITIES), message: isString }, required: ["severity"] },
  error: { shape: { message: isText, error: isString }, required: ["message"] },
  data: {
    shape: { artifact: isText, description: isString, message: isString },
    required: ["artifact"],
  },
  completed: { shape: { message: isText }, required: ["message"] },
};

export function quickEvent(value: unknown): SessionEvent | undefined {
  const type = plainFields(value)?.["type"];
  const variant =
    typeof type === "string" && Object.hasOwn(EVENT_SHAPES, type) ? EVENT_SHAPES[type] : undefined;
  if (variant === undefined) return undefined;
  const event = looseObject(
    value,
    { ...EVENT_BASE, type: () => true, ...variant.shape },
    ["timestamp", "from", ...variant.required],
    {},
    { data: copyObject },
  );
  // A finding needs a message or data.title (the schema's refinement).
  if (type === "finding" && event && event["message"] === undefined) {
    if (typeof (event["data"] as Fields | undefined)?.["title"] !== "string") return undefined;
  }
  return event as SessionEvent | undefined;
}

/** The lock owner is a strict object: exactly its four fields are kept. */
export function quickLockOwner(value: unknown): LockOwner | undefined {
  const fields = plainFields(value);
  if (fields === undefined) return undefined;
  const { pid, host, time, token } = fields;
  if (!isInteger(pid) || !isString(host) || !isTimestamp(time) || !isString(token)) return undefined;
  return { pid, host, time, token } as LockOwner;
}

const QUICK_CHECKS = {
  CoordinationSchema: quickCoordination,
  SessionEventSchema: quickEvent,
  LockOwnerSchema: quickLockOwner,
};
type Checked<K extends keyof typeof QUICK_CHECKS> = NonNullable<ReturnType<(typeof QUICK_CHECKS)[K]>>;

/**
 * Checks `value` against the schema named: the quick check when it decides, else the zod schema
 * (loaded now), which explains what is wrong as `validateWith` does.
 */
export async function checkFormat<K extends keyof typeof QUICK_CHECKS>(
  schema: K,
  value: unknown,
  where: { file: string; line?: number; text?: string },
): Promise<Checked<K>> {
  const quick = QUICK_CHECKS[schema](value) as Checked<K> | undefined;
  if (quick !== undefined) return quick;
  const schemas = await import("./schemas.js");
  return validateWith(schemas[schema] as unknown as z.ZodType<Checked<K>>, value, where);
}
