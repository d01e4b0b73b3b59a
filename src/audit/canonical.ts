import { createHash } from "node:crypto";
import { canonicalize } from "../protocol/canonical.js";

/**
 * Deterministic JSON for hashing audit entries: RFC 8785 (JCS), the same canonical form every ACP
 * signature covers (keys sorted by UTF-16 code units, no whitespace, `undefined` properties left
 * out; non-finite numbers and lone surrogates are errors).
 */
export function canonicalJson(value: unknown): string {
  return canonicalize(value);
}

/** The hash that chains audit entries: hex SHA-256 of the canonical JSON. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}
