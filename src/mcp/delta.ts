/**
 * The delta algorithm of the MCP agents capability: while an agent runs, the server
 * streams deltas; the client folds them, in order, into the output with `combineDelta`.
 *
 * Rules (`output + delta => new output`):
 * - different types cannot be combined (`DeltaCombineError`, naming both types and the JSON path);
 * - numbers add, strings concatenate, objects merge, combining values under common keys;
 * - `value + null => value`, `null + value => value`;
 * - `array + [] => array`, `[] + array => array`; when the output is `[]`, null or absent and the
 *   delta array starts with null, that null is dropped (so appending needs no knowledge of emptiness);
 * - otherwise the output's last element combines with the delta's first, and the rest are appended.
 *
 * Choices where the MCP agents capability is silent (documented in docs/mcp.md):
 * - booleans have no combining rule: `true + false` is a `DeltaCombineError` (a boolean is sent once);
 * - a value that does not exist yet (a new object key, an appended array element) is combined with
 *   "absent", so the leading-null rule applies at every depth, not only at the top;
 * - object keys whose delta value is `undefined` are skipped, as JSON.stringify would.
 */
import {
  childPath,
  isJsonObject,
  type JsonObject,
  type JsonType,
  type JsonValue,
  jsonEqual,
  jsonTypeOf,
  setOwn,
} from "./json.js";

/** A delta whose type does not fit the output at `path` (or two booleans, which never combine). */
export class DeltaCombineError extends Error {
  override readonly name = "DeltaCombineError";
  constructor(
    readonly path: string,
    readonly outputType: JsonType,
    readonly deltaType: JsonType,
  ) {
    super(
      outputType === deltaType
        ? `cannot combine ${outputType} with ${deltaType} at ${path}: ${outputType}s have no combining rule`
        : `cannot combine ${outputType} with ${deltaType} at ${path}`,
    );
  }
}

/** Streamed deltas that do not lead to the final output (detected by a server or a client). */
export class DeltaMismatchError extends Error {
  override readonly name = "DeltaMismatchError";
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`streamed deltas do not lead to the output at ${path}: ${reason}`);
  }
}

/** Combines an in-progress output (undefined before the first delta) with one delta. Pure. */
export function combineDelta(output: JsonValue | undefined, delta: JsonValue): JsonValue {
  return combineAt(output, delta, "$");
}

function combineAt(output: JsonValue | undefined, delta: JsonValue, path: string): JsonValue {
  if (delta === null) return output === undefined ? null : output;
  if (output === undefined || output === null) return combineWithAbsent(delta, path);
  const outputType = jsonTypeOf(output, path);
  const deltaType = jsonTypeOf(delta, path);
  if (outputType !== deltaType) throw new DeltaCombineError(path, outputType, deltaType);
  if (typeof output === "number") return output + (delta as number);
  if (typeof output === "string") return output + (delta as string);
  if (Array.isArray(output)) return combineArrays(output, delta as JsonValue[], path);
  if (isJsonObject(output)) return combineObjects(output, delta as JsonObject, path);
  throw new DeltaCombineError(path, outputType, deltaType);
}

/** `[] | null | absent + delta`: the delta itself, minus a leading null in any array (at any depth). */
function combineWithAbsent(delta: JsonValue, path: string): JsonValue {
  if (Array.isArray(delta)) {
    const start = delta[0] === null ? 1 : 0;
    const result: JsonValue[] = [];
    for (let i = start; i < delta.length; i++) {
      result.push(combineWithAbsent(delta[i] as JsonValue, childPath(path, i - start)));
    }
    return result;
  }
  if (isJsonObject(delta)) {
    const result: JsonObject = {};
    for (const key of Object.keys(delta)) {
      const value = delta[key];
      if (value !== undefined) setOwn(result, key, combineWithAbsent(value, childPath(path, key)));
    }
    return result;
  }
  jsonTypeOf(delta, path);
  return delta;
}

function combineArrays(output: JsonValue[], delta: JsonValue[], path: string): JsonValue[] {
  if (delta.length === 0) return output;
  if (output.length === 0) return combineWithAbsent(delta, path) as JsonValue[];
  const last = output.length - 1;
  const result = output.slice(0, last);
  result.push(combineAt(output[last], delta[0] as JsonValue, childPath(path, last)));
  for (let i = 1; i < delta.length; i++) {
    result.push(combineWithAbsent(delta[i] as JsonValue, childPath(path, result.length)));
  }
  return result;
}

function combineObjects(output: JsonObject, delta: JsonObject, path: string): JsonObject {
  const result: JsonObject = { ...output };
  for (const key of Object.keys(delta)) {
    const value = delta[key];
    if (value === undefined) continue;
    const existing = Object.hasOwn(output, key) ? output[key] : undefined;
    setOwn(result, key, combineAt(existing, value, childPath(path, key)));
  }
  return result;
}

/** Folds a sequence of deltas from nothing: what a client holds after receiving all of them. */
export function combineDeltas(deltas: Iterable<JsonValue>, start?: JsonValue): JsonValue | undefined {
  let output = start;
  for (const delta of deltas) output = combineDelta(output, delta);
  return output;
}

export interface SplitOptions {
  /** Longest string piece, in code points (default 16). */
  maxStringChunk?: number;
}

/**
 * Splits an output into deltas whose combination, from nothing, is exactly the output: strings in
 * pieces, arrays element by element (each new element opened with the `[null, first]` append idiom),
 * objects key by key; numbers, booleans and null are sent whole. For servers that stream a ready value.
 */
export function splitIntoDeltas(output: JsonValue, options: SplitOptions = {}): JsonValue[] {
  const maxChunk = options.maxStringChunk ?? 16;
  if (!Number.isInteger(maxChunk) || maxChunk < 1) {
    throw new RangeError(`maxStringChunk must be a positive integer, got ${maxChunk}`);
  }
  return split(output, maxChunk);
}

function split(value: JsonValue, maxChunk: number): JsonValue[] {
  if (typeof value === "string") {
    const codePoints = Array.from(value);
    if (codePoints.length <= maxChunk) return [value];
    const pieces: string[] = [];
    for (let i = 0; i < codePoints.length; i += maxChunk)
      pieces.push(codePoints.slice(i, i + maxChunk).join(""));
    return pieces;
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return [[]];
    const deltas: JsonValue[] = [];
    for (const element of value) {
      const [first, ...rest] = split(element, maxChunk);
      deltas.push([null, first as JsonValue]);
      for (const piece of rest) deltas.push([piece]);
    }
    return deltas;
  }
  if (isJsonObject(value)) {
    const keys = Object.keys(value);
    if (keys.length === 0) return [{}];
    const deltas: JsonValue[] = [];
    for (const key of keys) {
      for (const piece of split(value[key] as JsonValue, maxChunk)) {
        const delta: JsonObject = {};
        setOwn(delta, key, piece);
        deltas.push(delta);
      }
    }
    return deltas;
  }
  return [value];
}

/**
 * The one delta that turns `partial` (what has been streamed so far; undefined for nothing) into
 * `output`, or undefined when they are already equal. Lets a server guarantee that the deltas it
 * streamed combine to exactly the final output even when an agent streamed only part of it.
 * Throws `DeltaMismatchError` when no delta can do it (e.g. streamed text is not a prefix).
 */
export function remainingDelta(partial: JsonValue | undefined, output: JsonValue): JsonValue | undefined {
  return remainingAt(partial, output, "$");
}

function remainingAt(partial: JsonValue | undefined, output: JsonValue, path: string): JsonValue | undefined {
  if (partial !== undefined && jsonEqual(partial, output)) return undefined;
  if (partial === undefined || partial === null) return escapeForAbsent(output);
  const partialType = jsonTypeOf(partial, path);
  const outputType = jsonTypeOf(output, path);
  if (partialType !== outputType) {
    throw new DeltaMismatchError(path, `a ${partialType} was streamed but the output is ${outputType}`);
  }
  if (typeof partial === "number") {
    const delta = (output as number) - partial;
    if (partial + delta !== output) {
      throw new DeltaMismatchError(path, `${output} cannot be reached exactly from ${partial} by addition`);
    }
    return delta;
  }
  if (typeof partial === "string") {
    const text = output as string;
    if (!text.startsWith(partial))
      throw new DeltaMismatchError(path, "the streamed text is not a prefix of the output");
    return text.slice(partial.length);
  }
  if (Array.isArray(partial)) return remainingArray(partial, output as JsonValue[], path);
  if (isJsonObject(partial)) return remainingObject(partial, output as JsonObject, path);
  throw new DeltaMismatchError(
    path,
    `${JSON.stringify(partial)} was streamed but the output is ${JSON.stringify(output)}`,
  );
}

function remainingArray(partial: JsonValue[], output: JsonValue[], path: string): JsonValue {
  if (partial.length === 0) return escapeForAbsent(output);
  if (output.length < partial.length) {
    throw new DeltaMismatchError(
      path,
      `${partial.length} elements were streamed but the output has ${output.length}`,
    );
  }
  const last = partial.length - 1;
  for (let i = 0; i < last; i++) {
    if (!jsonEqual(partial[i], output[i])) {
      throw new DeltaMismatchError(childPath(path, i), "a completed element differs from the output");
    }
  }
  const lastDelta = remainingAt(partial[last], output[last] as JsonValue, childPath(path, last)) ?? null;
  return [lastDelta, ...output.slice(partial.length).map(escapeForAbsent)];
}

function remainingObject(partial: JsonObject, output: JsonObject, path: string): JsonValue {
  for (const key of Object.keys(partial)) {
    if (!Object.hasOwn(output, key))
      throw new DeltaMismatchError(childPath(path, key), "streamed key is not in the output");
  }
  const delta: JsonObject = {};
  for (const key of Object.keys(output)) {
    const target = output[key] as JsonValue;
    const piece = Object.hasOwn(partial, key)
      ? remainingAt(partial[key], target, childPath(path, key))
      : escapeForAbsent(target);
    if (piece !== undefined) setOwn(delta, key, piece);
  }
  return delta;
}

/** The delta that, combined with nothing, yields `value` (re-adds the nulls the leading-null rule drops). */
function escapeForAbsent(value: JsonValue): JsonValue {
  if (Array.isArray(value)) {
    const elements = value.map(escapeForAbsent);
    return value[0] === null ? [null, ...elements] : elements;
  }
  if (isJsonObject(value)) {
    const result: JsonObject = {};
    for (const key of Object.keys(value)) setOwn(result, key, escapeForAbsent(value[key] as JsonValue));
    return result;
  }
  return value;
}
