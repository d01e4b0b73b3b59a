/** JSON values as they travel in MCP messages, and the few helpers the delta algorithm needs. */

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export type JsonObject = { [key: string]: JsonValue };

export type JsonType = "null" | "boolean" | "number" | "string" | "array" | "object";

/** The JSON type of a value; throws a TypeError (naming `path`) for values JSON cannot carry. */
export function jsonTypeOf(value: unknown, path = "$"): JsonType {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  switch (typeof value) {
    case "boolean":
    case "number":
    case "string":
    case "object":
      return typeof value as JsonType;
    default:
      throw new TypeError(`${path} is ${typeof value}, which is not a JSON value`);
  }
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `$.a`, `$["odd key"]`, `$[3]`: the JSONPath-like notation used in every error message here. */
export function childPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/**
 * Sets an own enumerable property, even for keys such as `__proto__` that plain assignment would
 * treat as a prototype change (agents' outputs are arbitrary JSON, keys included).
 */
export function setOwn(target: JsonObject, key: string, value: JsonValue): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** The path of the first place where `a` and `b` differ (key order ignored), or undefined when equal. */
export function firstDifference(
  a: JsonValue | undefined,
  b: JsonValue | undefined,
  path = "$",
): string | undefined {
  if (a === b) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const found = firstDifference(a[i], b[i], childPath(path, i));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (isJsonObject(a) && isJsonObject(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const found = firstDifference(
        Object.hasOwn(a, key) ? a[key] : undefined,
        Object.hasOwn(b, key) ? b[key] : undefined,
        childPath(path, key),
      );
      if (found !== undefined) return found;
    }
    return undefined;
  }
  return path;
}

export function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return firstDifference(a, b) === undefined;
}
