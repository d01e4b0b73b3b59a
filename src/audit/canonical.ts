import { createHash } from "node:crypto";

/**
 * Deterministic JSON for hashing audit entries: object keys sorted by UTF-16 code units, no whitespace,
 * `undefined` properties left out, strings and numbers as JSON.stringify writes them. Non-finite numbers
 * and lone surrogates are errors. For the values an entry holds (strings, integers, booleans, null,
 * objects) this is byte for byte RFC 8785, so it can be swapped for `canonicalize` from acp-kit/protocol
 * without changing any existing hash. This function is the one place to make that swap.
 */
export function canonicalJson(value: unknown): string {
  return serialize(value, "");
}

/** The hash that chains audit entries: hex SHA-256 of the canonical JSON. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function serializeString(s: string, path: string): string {
  if (!(s as string & { isWellFormed(): boolean }).isWellFormed()) {
    throw new TypeError(`lone surrogate in string at ${path || "/"}`);
  }
  return JSON.stringify(s);
}

function serialize(value: unknown, path: string): string {
  switch (typeof value) {
    case "string":
      return serializeString(value, path);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`non-finite number at ${path || "/"}`);
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) {
        return `[${value.map((item, i) => (item === undefined ? "null" : serialize(item, `${path}/${i}`))).join(",")}]`;
      }
      const record = value as Record<string, unknown>;
      const parts: string[] = [];
      for (const key of Object.keys(record).sort()) {
        const item = record[key];
        if (item === undefined) continue;
        const childPath = `${path}/${key}`;
        parts.push(`${serializeString(key, childPath)}:${serialize(item, childPath)}`);
      }
      return `{${parts.join(",")}}`;
    }
    default:
      throw new TypeError(`${typeof value} is not JSON at ${path || "/"}`);
  }
}
