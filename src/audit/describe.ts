/**
 * Describing values for people, in summaries: one clean line, short values, and anything that
 * looks like a secret (by its field's name or by its shape) shown as [redacted].
 */

export const MAX_VALUE_CHARS = 48;
const MAX_LIST_ITEMS = 4;

const SECRET_KEY =
  /secret|token|passw|pwd|api[-_]?key|credential|private[-_]?key|^auth(orization)?$|cookie|session[-_]?id|signature|^jw[es]$|^ssn$|^otp$|^cvv$|card[-_]?number/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SECRET_VALUE = [
  /^eyJ[A-Za-z0-9_-]*\./, // JOSE compact serialisation (JWT, JWS, JWE)
  /-----BEGIN [A-Z ]*KEY-----/,
  /^(sk|pk|rk|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_-]{8,}/,
  /^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9+/_=-]{32,}$/, // long opaque tokens
];

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** Shorter than any SECRET_VALUE can match, except a JOSE value (`eyJ` and a dot). */
const SHORTEST_SECRET = 11;

export function isSecretValue(value: string): boolean {
  if (value.length < SHORTEST_SECRET && !value.startsWith("eyJ")) return false;
  return !UUID.test(value) && SECRET_VALUE.some((pattern) => pattern.test(value));
}

/** What `clean` would change: a lone surrogate, a control or separator character, or whitespace other than single inner spaces. */
const UNCLEAN =
  /[\uD800-\uDFFF\p{Cc}\p{Zl}\p{Zp}\t\n\v\f\r\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000\uFEFF]| {2}|^ | $/u;

/** One line of plain text: control characters and runs of whitespace become one space, lone surrogates U+FFFD. */
export function clean(text: string): string {
  // Most text is clean already; the test is much cheaper than the two replaces (one per message field).
  if (!UNCLEAN.test(text)) return text;
  return text
    .replace(/[\uD800-\uDFFF]/gu, "\uFFFD")
    .replace(/[\p{Cc}\p{Zl}\p{Zp}\s]+/gu, " ")
    .trim();
}

/** Shortens by code points, so a surrogate pair is never split. */
export function truncate(text: string, max: number): string {
  // A string has at least as many UTF-16 units as code points.
  if (text.length <= max) return text;
  const chars = Array.from(text);
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join("")}…`;
}

export function short(text: string, max = MAX_VALUE_CHARS): string {
  return truncate(text, max);
}

/** A clean, short string field of `record`, unless it looks like a secret. */
export function textOf(
  record: Record<string, unknown> | undefined,
  key: string,
  max = MAX_VALUE_CHARS,
): string | undefined {
  const value = record?.[key];
  if (typeof value !== "string" || isSecretKey(key) || isSecretValue(value)) return undefined;
  const text = clean(value);
  return text === "" ? undefined : short(text, max);
}

export function firstString(record: Record<string, unknown>, keys: string[]): string | undefined {
  for (const key of keys) {
    const value = record[key];
    if (typeof value === "string" && clean(value) !== "" && !isSecretValue(value)) return clean(value);
  }
  return undefined;
}

/** `key: value, key: value (+2 more)`, secrets redacted, each value short. */
export function describeFields(record: Record<string, unknown>, separator = ": "): string {
  const keys = Object.keys(record).filter((key) => key !== "summary");
  const shown = keys.slice(0, MAX_LIST_ITEMS).map((key) => {
    const name = short(clean(key), 32);
    return `${name}${separator}${isSecretKey(key) ? "[redacted]" : describeValue(record[key])}`;
  });
  return shown.join(", ") + (keys.length > MAX_LIST_ITEMS ? ` (+${keys.length - MAX_LIST_ITEMS} more)` : "");
}

/** A list as `a, b, c (+2 more)`; tool descriptors by name. */
export function describeList(value: unknown): string {
  if (!Array.isArray(value)) return describeValue(value);
  const names = value.map((item) =>
    isRecord(item) && typeof item["name"] === "string" ? describeValue(item["name"]) : describeValue(item),
  );
  const shown = names.slice(0, MAX_LIST_ITEMS).join(", ");
  return shown + (names.length > MAX_LIST_ITEMS ? ` (+${names.length - MAX_LIST_ITEMS} more)` : "");
}

export function describeValue(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") return isSecretValue(value) ? "[redacted]" : short(clean(value));
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every((item) => typeof item === "string")) return describeList(value);
    return `${value.length} item${value.length === 1 ? "" : "s"}`;
  }
  if (isRecord(value)) {
    const keys = Object.keys(value).filter((key) => !isSecretKey(key));
    return keys.length === 0 ? "{}" : `{${short(keys.map((key) => clean(key)).join(", "))}}`;
  }
  return "";
}

/**
 * An answer's content in a few words: one list field is counted by its last word (`available_slots`
 * with three items: `3 slots`), one other field is `name value`, more are `name: value, …`.
 */
export function describeAnswer(body: Record<string, unknown>): string {
  const keys = Object.keys(body).filter((key) => key !== "summary");
  const [only] = keys;
  if (keys.length !== 1 || only === undefined) return describeFields(body);
  const value = body[only];
  if (isSecretKey(only)) return `${short(clean(only), 32)} [redacted]`;
  if (Array.isArray(value)) return countOf(value.length, only);
  return `${short(clean(only), 32)} ${describeValue(value)}`;
}

/** `3 slots`, `1 slot`: a count and the last word of a field name (`available_slots`, `openItems`). */
export function countOf(count: number, field: string): string {
  const words = clean(field)
    .replace(/([a-z])([A-Z])/g, "$1 $2")
    .split(/[\s_-]+/)
    .filter(Boolean);
  const noun = (words.at(-1) ?? "item").toLowerCase();
  const plural = noun.endsWith("s") ? noun : `${noun}s`;
  const singular = noun.length > 1 && noun.endsWith("s") && !noun.endsWith("ss") ? noun.slice(0, -1) : noun;
  return `${count} ${count === 1 ? singular : plural}`;
}
