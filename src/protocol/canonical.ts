/**
 * RFC 8785 JSON Canonicalization Scheme (JCS): the bytes every ACP signature covers.
 * - numbers: ECMAScript Number-to-String (what JSON.stringify does), -0 as 0; NaN/Infinity are errors
 * - strings: JSON.stringify escaping (the RFC's rules); lone surrogates are errors
 * - object keys sorted by UTF-16 code units (Array.prototype.sort's default order), no whitespace
 * Properties whose value is `undefined` are left out, as JSON.stringify leaves them out of the wire text.
 *
 * This is on the hot path of every verify. The fast path checks the value in one walk that copies
 * what is out of JCS order (only that), and lets the native JSON.stringify write the text (its
 * number and string output is exactly JCS's). Objects with array-index-like keys, which engines
 * always enumerate first in numeric order, take the explicit serializer. Only when a value cannot
 * be represented does a third walk find where, for the error message.
 */
export class CanonicalizationError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(`${message} at ${path || "/"}`);
    this.name = "CanonicalizationError";
  }
}

const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

class Unrepresentable extends Error {}
class NeedsExplicitOrder extends Error {}

const isIndexLike = (key: string): boolean => {
  const first = key.charCodeAt(0);
  return first >= 48 && first <= 57 && /^(0|[1-9]\d*)$/.test(key);
};

/** True when the keys are already in UTF-16 code unit order (the common case is: they are not). */
function inOrder(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}

/** Sets a member, keeping a "__proto__" member (own property after JSON.parse) a member. */
function setMember(target: Record<string, unknown>, key: string, item: unknown): void {
  if (key === "__proto__") Object.defineProperty(target, key, { value: item, enumerable: true });
  else target[key] = item;
}

/**
 * Returns the value, or a copy whose object members are inserted in JCS order; checks every value on
 * the way and throws if it is not JSON. Copies start only where something differs (out-of-order
 * keys, or a child that had to be copied), so an already canonical value costs no allocation.
 */
function prepare(value: unknown): unknown {
  switch (typeof value) {
    case "string":
      if (!isWellFormed(value)) throw new Unrepresentable();
      return value;
    case "number":
      if (!Number.isFinite(value)) throw new Unrepresentable();
      return value;
    case "boolean":
      return value;
    case "object": {
      if (value === null) return value;
      if (Array.isArray(value)) {
        let copy: unknown[] | undefined;
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          const prepared = item === undefined ? null : prepare(item);
          if (copy) copy.push(prepared);
          else if (prepared !== item) {
            copy = value.slice(0, i);
            copy.push(prepared);
          }
        }
        return copy ?? value;
      }
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record);
      let copy: Record<string, unknown> | undefined;
      if (!inOrder(keys)) {
        keys.sort();
        copy = {};
      }
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string;
        if (!isWellFormed(key)) throw new Unrepresentable();
        if (isIndexLike(key)) throw new NeedsExplicitOrder();
        const item = record[key];
        if (item === undefined) continue; // JSON.stringify leaves it out, copy or not
        const prepared = prepare(item);
        if (copy) setMember(copy, key, prepared);
        else if (prepared !== item) {
          copy = {};
          for (let j = 0; j < i; j++) setMember(copy, keys[j] as string, record[keys[j] as string]);
          setMember(copy, key, prepared);
        }
      }
      return copy ?? value;
    }
    default:
      throw new Unrepresentable();
  }
}

/** The explicit serializer, for objects with array-index-like keys. */
function serialize(value: unknown): string {
  switch (typeof value) {
    case "string":
      if (!isWellFormed(value)) throw new Unrepresentable();
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new Unrepresentable();
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) {
        let out = "[";
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ",";
          const item: unknown = value[i];
          out += item === undefined ? "null" : serialize(item);
        }
        return out + "]";
      }
      const record = value as Record<string, unknown>;
      let out = "{";
      for (const key of Object.keys(record).sort()) {
        const item = record[key];
        if (item === undefined) continue;
        if (!isWellFormed(key)) throw new Unrepresentable();
        out += `${out.length > 1 ? "," : ""}${JSON.stringify(key)}:${serialize(item)}`;
      }
      return out + "}";
    }
    default:
      throw new Unrepresentable();
  }
}

/** Finds the first value JCS cannot represent, for the error message. */
function locate(value: unknown, path: string): CanonicalizationError | undefined {
  if (typeof value === "string")
    return isWellFormed(value) ? undefined : new CanonicalizationError("lone surrogate in string", path);
  if (typeof value === "number")
    return Number.isFinite(value) ? undefined : new CanonicalizationError(`non-finite number ${value}`, path);
  if (typeof value === "boolean" || value === null || value === undefined) return undefined;
  if (typeof value !== "object") return new CanonicalizationError(`${typeof value} is not JSON`, path);
  for (const [key, item] of Object.entries(value)) {
    const childPath = `${path}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    if (!isWellFormed(key)) return new CanonicalizationError("lone surrogate in property name", childPath);
    const found = locate(item, childPath);
    if (found) return found;
  }
  return undefined;
}

/** The RFC 8785 canonical form of a JSON value, as a string (encode as UTF-8 for the bytes). */
export function canonicalize(value: unknown): string {
  try {
    return JSON.stringify(prepare(value));
  } catch (err) {
    if (err instanceof NeedsExplicitOrder) return explicit(value);
    if (err instanceof Unrepresentable) throw locate(value, "") ?? new CanonicalizationError("not JSON", "");
    throw err;
  }
}

function explicit(value: unknown): string {
  try {
    return serialize(value);
  } catch (err) {
    if (err instanceof Unrepresentable) throw locate(value, "") ?? new CanonicalizationError("not JSON", "");
    throw err;
  }
}
