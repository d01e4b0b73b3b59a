import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  combineDelta,
  combineDeltas,
  DeltaCombineError,
  DeltaMismatchError,
  type JsonValue,
  remainingDelta,
  splitIntoDeltas,
} from "../../src/mcp/index.js";

describe("combineDelta: every example of the MCP agents capability", () => {
  it("different types cannot be combined: 1 + ['hello'] is an error", () => {
    expect(() => combineDelta(1, ["hello"])).toThrow(DeltaCombineError);
  });
  it("numbers combine by addition: 1 + 2 => 3", () => {
    expect(combineDelta(1, 2)).toBe(3);
  });
  it('strings concatenate: "hello" + "there" => "hellothere"', () => {
    expect(combineDelta("hello", "there")).toBe("hellothere");
  });
  it("objects merge, combining common keys", () => {
    expect(combineDelta({ a: 1, b: "hello" }, { b: "world", c: 2 })).toEqual({ a: 1, b: "helloworld", c: 2 });
  });
  it("value + null => value, null + value => value", () => {
    expect(combineDelta("value", null)).toBe("value");
    expect(combineDelta(null, "value")).toBe("value");
    expect(combineDelta({ a: [1] }, null)).toEqual({ a: [1] });
    expect(combineDelta(null, { a: [1] })).toEqual({ a: [1] });
  });
  it("array + [] => array, [] + array => array", () => {
    expect(combineDelta(["a", 1], [])).toEqual(["a", 1]);
    expect(combineDelta([], ["a", 1])).toEqual(["a", 1]);
  });
  it('[] + [null, "general", "Kenobi"] drops the leading null', () => {
    expect(combineDelta([], [null, "general", "Kenobi"])).toEqual(["general", "Kenobi"]);
  });
  it("the leading null is also dropped when the output is null or absent", () => {
    expect(combineDelta(null, [null, "general", "Kenobi"])).toEqual(["general", "Kenobi"]);
    expect(combineDelta(undefined, [null, "general", "Kenobi"])).toEqual(["general", "Kenobi"]);
  });
  it("non-empty arrays combine the last element of the output with the first of the delta", () => {
    expect(combineDelta(["hello", "there"], ["general", "Kenobi"])).toEqual([
      "hello",
      "theregeneral",
      "Kenobi",
    ]);
  });
  it("a leading null appends to a non-empty array", () => {
    expect(combineDelta(["hello", "there"], [null, "general", "Kenobi"])).toEqual([
      "hello",
      "there",
      "general",
      "Kenobi",
    ]);
  });
  it('[] + ["general", "Kenobi"] => ["general", "Kenobi"]', () => {
    expect(combineDelta([], ["general", "Kenobi"])).toEqual(["general", "Kenobi"]);
  });
  it("the MCP agents capability's progress example: deltas of {text} build the text", () => {
    expect(combineDeltas([{ text: "Howd" }, { text: "y back" }, { text: " at ya!" }])).toEqual({
      text: "Howdy back at ya!",
    });
  });
});

describe("combineDelta: errors and the choices the MCP agents capability leaves open", () => {
  it("a type mismatch names both types and the JSON path", () => {
    const attempt = () => combineDelta({ a: { b: ["x", 1] } }, { a: { b: [null, "y"], c: 1 }, d: "z" });
    expect(attempt).not.toThrow();
    try {
      combineDelta({ list: [{ n: 1 }, { n: 2 }] }, { list: [{ n: "two" }] });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(DeltaCombineError);
      const error = err as DeltaCombineError;
      expect(error.path).toBe("$.list[1].n");
      expect(error.outputType).toBe("number");
      expect(error.deltaType).toBe("string");
      expect(error.message).toBe("cannot combine number with string at $.list[1].n");
    }
  });
  it("object vs array and string vs object are mismatches too, with quoted odd keys in the path", () => {
    expect(() => combineDelta({ "odd key": {} }, { "odd key": [] })).toThrow(
      'cannot combine object with array at $["odd key"]',
    );
    expect(() => combineDelta("text", { a: 1 })).toThrow("cannot combine string with object at $");
    expect(() => combineDelta([], "x")).toThrow("cannot combine array with string at $");
  });
  it("booleans have no combining rule", () => {
    expect(() => combineDelta({ done: false }, { done: true })).toThrow(
      "cannot combine boolean with boolean at $.done: booleans have no combining rule",
    );
    expect(combineDelta({ done: false }, { done: null })).toEqual({ done: false });
    expect(combineDelta({}, { done: true })).toEqual({ done: true });
  });
  it("new keys and appended elements are combined with nothing: the leading-null rule applies at depth", () => {
    expect(combineDelta({}, { list: [null, 1] })).toEqual({ list: [1] });
    expect(combineDelta([[1]], [null, [null, 2]])).toEqual([[1], [2]]);
    expect(combineDelta({ a: [] }, { a: [null, null] })).toEqual({ a: [null] });
  });
  it("a null delta element keeps an existing null; a new null key is kept", () => {
    expect(combineDelta([null], [null, 1])).toEqual([null, 1]);
    expect(combineDelta({}, { a: null })).toEqual({ a: null });
    expect(combineDelta(undefined, null)).toBeNull();
  });
  it("does not change its arguments", () => {
    const output = { a: [1, "x"], b: { c: "y" } };
    const delta = { a: ["z", 2], b: { c: "w", d: [null, 1] } };
    const before = JSON.stringify([output, delta]);
    expect(combineDelta(output, delta)).toEqual({ a: [1, "xz", 2], b: { c: "yw", d: [1] } });
    expect(JSON.stringify([output, delta])).toBe(before);
  });
  it("keeps a __proto__ key as an ordinary key", () => {
    const delta = JSON.parse('{"__proto__": {"polluted": 1}}') as JsonValue;
    const result = combineDelta({}, delta) as Record<string, unknown>;
    expect(Object.keys(result)).toEqual(["__proto__"]);
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
  it("rejects values JSON cannot carry", () => {
    expect(() => combineDelta({ a: 1 }, { a: (() => 1) as unknown as JsonValue })).toThrow(
      "$.a is function, which is not a JSON value",
    );
  });
});

describe("splitIntoDeltas", () => {
  it("streams strings in pieces, arrays element by element, objects key by key", () => {
    expect(splitIntoDeltas({ text: "abcdef", list: [1, "xy"] }, { maxStringChunk: 2 })).toEqual([
      { text: "ab" },
      { text: "cd" },
      { text: "ef" },
      { list: [null, 1] },
      { list: [null, "xy"] },
    ]);
  });
  it("does not cut a surrogate pair", () => {
    const deltas = splitIntoDeltas("a😀b", { maxStringChunk: 1 });
    expect(deltas).toEqual(["a", "😀", "b"]);
  });
  it("rejects a chunk size that is not a positive integer", () => {
    expect(() => splitIntoDeltas("x", { maxStringChunk: 0 })).toThrow(
      "maxStringChunk must be a positive integer",
    );
  });
  it("property: the deltas of any JSON value combine, in order, to exactly that value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 1, max: 8 }), (value, chunk) => {
        const output = value as JsonValue;
        const deltas = splitIntoDeltas(output, { maxStringChunk: chunk });
        expect(combineDeltas(deltas)).toEqual(output);
        // …and after the wire: JSON round trips of the deltas combine to the round trip of the output
        // (JSON itself turns -0 into 0).
        const overTheWire = deltas.map((d) => JSON.parse(JSON.stringify(d)) as JsonValue);
        expect(combineDeltas(overTheWire)).toEqual(JSON.parse(JSON.stringify(output)));
      }),
      { numRuns: 500 },
    );
  });
});

describe("remainingDelta", () => {
  it("completes text streamed so far and adds the keys never streamed", () => {
    const partial = combineDeltas([{ summary: "Cats " }, { summary: "are" }]);
    const delta = remainingDelta(partial, { summary: "Cats are great.", sentences: 1 });
    expect(delta).toEqual({ summary: " great.", sentences: 1 });
  });
  it("is undefined when nothing remains, and the whole value (escaped) when nothing was streamed", () => {
    expect(remainingDelta({ a: [1] }, { a: [1] })).toBeUndefined();
    const output: JsonValue = { list: [null, 1] };
    const delta = remainingDelta(undefined, output);
    expect(delta).toEqual({ list: [null, null, 1] });
    expect(combineDelta(undefined, delta as JsonValue)).toEqual(output);
  });
  it("throws DeltaMismatchError naming the path when no delta can reach the output", () => {
    expect(() => remainingDelta({ text: "Hello" }, { text: "Howdy" })).toThrow(
      "streamed deltas do not lead to the output at $.text: the streamed text is not a prefix of the output",
    );
    expect(() => remainingDelta([1, 2, 3], [1, 5])).toThrow(DeltaMismatchError);
    expect(() => remainingDelta({ a: 1, b: 2 }, { a: 1 })).toThrow(
      "at $.b: streamed key is not in the output",
    );
    expect(() => remainingDelta("x", 1)).toThrow("a string was streamed but the output is number");
    expect(() => remainingDelta(true, false)).toThrow(DeltaMismatchError);
  });
  it("property: from any prefix of a value's deltas, the remaining delta completes it exactly", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(), fc.integer({ min: 1, max: 4 }), (value, cut, chunk) => {
        const output = value as JsonValue;
        const deltas = splitIntoDeltas(output, { maxStringChunk: chunk });
        const partial = combineDeltas(deltas.slice(0, cut % (deltas.length + 1)));
        const last = remainingDelta(partial, output);
        const completed = last === undefined ? partial : combineDelta(partial, last);
        expect(completed).toEqual(output);
      }),
      { numRuns: 500 },
    );
  });
});
