import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CanonicalizationError, canonicalize } from "../../src/protocol/index.js";

const fromHex = (hex: string) => Buffer.from(hex, "hex").readDoubleBE(0);

describe("RFC 8785's own examples", () => {
  // Appendix B: IEEE 754 bit patterns and their canonical text.
  it.each([
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ])("number %s serialises as %s", (hex, expected) => {
    expect(canonicalize(fromHex(hex))).toBe(expected);
    expect(canonicalize({ n: fromHex(hex) })).toBe(`{"n":${expected}}`);
  });

  it.each([
    ["7fffffffffffffff", "NaN"],
    ["7ff0000000000000", "Infinity"],
    ["fff0000000000000", "-Infinity"],
  ])("number %s (%s) is an error", (hex) => {
    expect(() => canonicalize(fromHex(hex))).toThrow(CanonicalizationError);
  });

  it("sorts property names by UTF-16 code units (section 3.2.3)", () => {
    const input = JSON.parse(
      '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",' +
        '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control",' +
        '"\\u00f6":"Latin Small Letter O With Diaeresis"}',
    );
    // Read the order from the text: JSON.parse would put the index-like key "1" first again.
    const order = [...canonicalize(input).matchAll(/":"([^"]+)"/g)].map((m) => m[1]);
    expect(order).toEqual([
      "Carriage Return",
      "One",
      "Control",
      "Latin Small Letter O With Diaeresis",
      "Euro Sign",
      "Emoji: Grinning Face",
      "Hebrew Letter Dalet With Dagesh",
    ]);
  });

  it("reproduces the section 3.2.2 example byte for byte", () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",' +
        '"literals": [null, true, false]}',
    );
    const canonical = canonicalize(input);
    expect(canonical).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
    // Section 3.2.4: the UTF-8 bytes of that output.
    expect(Buffer.from(canonical).toString("hex").replace(/(..)/g, "$1 ").trim()).toBe(
      [
        "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72",
        "75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a",
        "5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31",
        "65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37",
        "5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30",
        "30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d",
      ].join(" "),
    );
  });
});

describe("values JCS cannot represent are errors naming where", () => {
  it.each<[string, unknown, string]>([
    ["NaN in an object", { a: { b: Number.NaN } }, "/a/b"],
    ["Infinity in an array", { list: [1, Number.POSITIVE_INFINITY] }, "/list/1"],
    ["a lone high surrogate in a string", { text: "abc\ud800" }, "/text"],
    ["a lone low surrogate in a string", ["\udc00"], "/0"],
    ["a lone surrogate in a property name", { "k\ud800": 1 }, "/k\ud800"],
    ["a bigint", { n: 1n }, "/n"],
    ["a function", { f: () => 1 }, "/f"],
    ["a symbol", { s: Symbol("x") }, "/s"],
  ])("%s", (_name, value, path) => {
    try {
      canonicalize(value);
      expect.unreachable("canonicalize accepted an unrepresentable value");
    } catch (err) {
      expect(err).toBeInstanceOf(CanonicalizationError);
      expect((err as CanonicalizationError).path).toBe(path);
    }
  });

  it("reports the problem inside objects with index-like keys too (the explicit serializer)", () => {
    expect(() => canonicalize({ "1": "\ud800" })).toThrow(/lone surrogate in string at \/1/);
  });

  it("accepts well-formed surrogate pairs", () => {
    expect(canonicalize({ emoji: "😀" })).toBe('{"emoji":"😀"}');
  });
});

describe("edge cases of the fast path", () => {
  it("keeps a __proto__ member (own property after JSON.parse) when it reorders keys", () => {
    const parsed = JSON.parse('{"b":1,"__proto__":{"x":2},"a":3}');
    expect(canonicalize(parsed)).toBe('{"__proto__":{"x":2},"a":3,"b":1}');
  });

  it("sorts index-like keys as strings, not numbers", () => {
    expect(canonicalize({ "10": 0, "9": 0, "1": 0, a: 0 })).toBe('{"1":0,"10":0,"9":0,"a":0}');
  });

  it("leaves out undefined members and writes undefined array items as null, like JSON.stringify", () => {
    expect(canonicalize({ b: undefined, a: [undefined, 1] })).toBe('{"a":[null,1]}');
    expect(canonicalize({ "2": undefined, "1": [undefined] })).toBe('{"1":[null]}');
  });

  it("writes -0 as 0 and escapes control characters in lowercase hex", () => {
    expect(canonicalize([-0, "\u001f\u007f"])).toBe('[0,"\\u001f\u007f"]');
  });

  it("does not modify its input", () => {
    const input = { z: { y: 1, x: [{ b: 2, a: 1 }] }, a: 0 };
    const before = JSON.stringify(input);
    canonicalize(input);
    expect(JSON.stringify(input)).toBe(before);
  });
});

describe("properties (fast-check)", () => {
  const json = fc.jsonValue();

  it("is idempotent under parse and canonicalize", () => {
    fc.assert(
      fc.property(json, (value) => {
        const once = canonicalize(value);
        expect(canonicalize(JSON.parse(once))).toBe(once);
      }),
      { numRuns: 500 },
    );
  });

  /** The same JSON value with every object's members inserted in a shuffled order. */
  function shuffled(value: unknown, seed: number): unknown {
    if (Array.isArray(value)) return value.map((item, i) => shuffled(item, seed + i));
    if (typeof value !== "object" || value === null) return value;
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = (seed * 31 + i * 17) % (i + 1);
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    return Object.fromEntries(entries.map(([k, v], i) => [k, shuffled(v, seed + i + 1)]));
  }

  it("does not depend on the order in which keys were inserted", () => {
    fc.assert(
      fc.property(json, fc.nat(1000), (value, seed) => {
        expect(canonicalize(shuffled(value, seed))).toBe(canonicalize(value));
      }),
      { numRuns: 500 },
    );
  });

  it("equals JSON.stringify for primitives", () => {
    const primitive = fc.oneof(
      fc.string({ unit: "grapheme" }),
      fc.string({ unit: "binary" }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
    );
    fc.assert(
      fc.property(primitive, (value) => {
        expect(canonicalize(value)).toBe(JSON.stringify(value));
      }),
      { numRuns: 1000 },
    );
  });

  it("sorts every object's keys by UTF-16 code units and keeps array order", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ unit: "binary" }), fc.integer()), (record) => {
        const keys = Object.keys(record).sort();
        const expected = `{${keys.map((k) => `${JSON.stringify(k)}:${record[k]}`).join(",")}}`;
        expect(canonicalize(record)).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });
});
