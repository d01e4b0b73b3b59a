/**
 * The REST API's one casing, and its deprecation period. Every REST record is snake_case, as the
 * ACP messaging platform documents its API; records that once had camelCase names carry each of
 * those too, next to its snake_case name, for one deprecation period, and request bodies accept
 * them. The gateway adds the old names to what it sends (`withDeprecatedNames`) and reads them in
 * what it receives (`withCurrentNames`); the SDK reads the answers of an older gateway, which sends
 * only camelCase, with `withCurrentNames` too. Fields whose values are not records of the API (a
 * signed envelope, a proposal's terms) are left as they are: see `OPAQUE_FIELDS`.
 */
import { z } from "zod";

/**
 * Each name converted once: every field of every record of an answer is renamed (a feed page of 100
 * items, a messages page of 50, each field twice), and the API's names are few. Bounded, since a
 * request body's names are the caller's: past NAME_CACHE names the cache starts again.
 */
const NAME_CACHE = 1024;
function convertedOnce(convert: (name: string) => string): (name: string) => string {
  const cache = new Map<string, string>();
  return (name) => {
    let converted = cache.get(name);
    if (converted === undefined) {
      converted = convert(name);
      if (cache.size >= NAME_CACHE) cache.clear();
      cache.set(name, converted);
    }
    return converted;
  };
}

/** `retry_count` → `retryCount`. */
export const camelName = convertedOnce((name) =>
  name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase()),
);

/** `retryCount` → `retry_count`. */
export const snakeName = convertedOnce((name) =>
  name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`),
);

/** The camelCase of a snake_case name, as a type. */
export type CamelName<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelName<Tail>>}`
  : S;

type SnakeName<S extends string> = S extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${SnakeName<Tail>}`
  : S;

/** A record's fields under their snake_case names, at every level: `{link: {lastError}}` as `{link: {last_error}}`. */
export type SnakeCased<T> = T extends readonly (infer Item)[]
  ? SnakeCased<Item>[]
  : T extends object
    ? { [K in keyof T as K extends string ? SnakeName<K> : K]: SnakeCased<T[K]> }
    : T;

/**
 * A record of the gateway's (camelCase, as its TypeScript has it) as a REST answer reads: snake_case
 * at every level, the deprecated camelCase names beside them (what `restRecord` makes of it).
 */
export type RestAnswer<T> = WithDeprecatedNames<SnakeCased<T>>;

/** A record's fields under their snake_case names, one level deep: `{createdAt}` as `{created_at}`. */
export type SnakeCasedFields<T> = { [K in keyof T as K extends string ? SnakeName<K> : K]: T[K] };

/**
 * A record with its deprecated camelCase names too, at every level, as the gateway answers during
 * the deprecation period: `{queued_at}` reads as `{queued_at, queuedAt}`.
 */
export type WithDeprecatedNames<T> = T extends readonly (infer Item)[]
  ? WithDeprecatedNames<Item>[]
  : T extends object
    ? { [K in keyof T]: WithDeprecatedNames<T[K]> } & {
        [K in keyof T as K extends string
          ? CamelName<K> extends K
            ? never
            : CamelName<K>
          : never]: WithDeprecatedNames<T[K]>;
      }
    : T;

/**
 * Fields whose value is carried as given, never renamed inside: what is signed or hashed as it is
 * (envelopes, an agreement, a dispute's snapshot, a signed status update), what agents and
 * principals write (terms, bodies, context, results, data), and maps keyed by agent ids or options.
 */
export const OPAQUE_FIELDS: ReadonlySet<string> = new Set([
  // signed or hashed
  "envelope",
  "envelopes",
  "announce",
  "capabilities",
  "agreement",
  "snapshot",
  "update",
  "command",
  // written by agents and principals
  "body",
  "content",
  "context",
  "terms",
  "params",
  "result",
  "data",
  "metadata",
  "payload",
  "details",
  "action",
  // keyed by agent ids, recipients or vote options
  "delivered",
  "failed",
  "telling",
  "tally",
  "balances",
  // keyed by refusal reasons (`InvalidParams`)
  "refusals",
]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function eachRecord(value: unknown, convert: (record: Record<string, unknown>) => unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => eachRecord(item, convert));
  return isPlainObject(value) ? convert(value) : value;
}

/** Adds the deprecated camelCase copy of each snake_case field, at every level but the opaque fields. */
export function withDeprecatedNames<T>(
  view: T,
  opaque: ReadonlySet<string> = OPAQUE_FIELDS,
): WithDeprecatedNames<T> {
  const convert = (record: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(record)) {
      const converted = opaque.has(name) ? value : eachRecord(value, convert);
      out[name] = converted;
      const old = camelName(name);
      if (old !== name && !(old in record)) out[old] = converted;
    }
    return out;
  };
  return eachRecord(view, convert) as WithDeprecatedNames<T>;
}

/**
 * The record with its fields under their snake_case names, at every level but the opaque fields: a
 * camelCase field is renamed, or dropped when its snake_case name is there with the same value (the
 * deprecated copy). One whose snake_case name holds something else stays, for a strict schema to
 * refuse by name. What the gateway reads a request body with, and the SDK an older gateway's answer.
 */
export function withCurrentNames(value: unknown, opaque: ReadonlySet<string> = OPAQUE_FIELDS): unknown {
  const convert = (record: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [name, field] of Object.entries(record)) {
      const current = snakeName(name);
      const converted = opaque.has(name) || opaque.has(current) ? field : eachRecord(field, convert);
      if (current === name) {
        out[name] = converted;
        continue;
      }
      if (!(current in record)) {
        out[current] = converted;
      } else if (JSON.stringify(record[current]) !== JSON.stringify(field)) {
        out[name] = converted;
      }
    }
    return out;
  };
  return eachRecord(value, convert);
}

/**
 * A record of the gateway's (camelCase, as its TypeScript has it) as the REST API answers it: under
 * snake_case names, the deprecated camelCase ones beside them.
 */
export function restRecord<T>(record: T, opaque: ReadonlySet<string> = OPAQUE_FIELDS): unknown {
  return withDeprecatedNames(withCurrentNames(record, opaque), opaque);
}

/**
 * A REST answer under the SDK's TypeScript names (camelCase): each snake_case field renamed, the
 * deprecated copy beside it dropped. An older gateway's camelCase answer reads as it is.
 */
export function camelCased(value: unknown, opaque: ReadonlySet<string> = OPAQUE_FIELDS): unknown {
  const convert = (record: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [name, field] of Object.entries(record)) {
      const current = snakeName(name);
      if (current !== name && current in record) continue; // the deprecated copy
      const converted = opaque.has(name) ? field : eachRecord(field, convert);
      out[camelName(name)] = converted;
    }
    return out;
  };
  return eachRecord(value, convert);
}

/** A request body's schema (snake_case) that reads each deprecated camelCase name as its snake_case one. */
export function acceptingDeprecatedNames<S extends z.ZodType>(
  schema: S,
  opaque: ReadonlySet<string> = OPAQUE_FIELDS,
) {
  return z.preprocess((body) => withCurrentNames(body, opaque), schema);
}

/**
 * Reads a REST answer with `schema` (snake_case): an older gateway's camelCase names are read as
 * their snake_case ones, and the record comes back with both, so code that reads the old names
 * keeps working for the deprecation period. What the SDK parses the gateway's answers with.
 */
export function readingDeprecatedNames<S extends z.ZodType>(
  schema: S,
): { parse(value: unknown): WithDeprecatedNames<z.infer<S>> } {
  return { parse: (value) => withDeprecatedNames(schema.parse(withCurrentNames(value)) as z.infer<S>) };
}
