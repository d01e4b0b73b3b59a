import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonSyntaxErrorOffset, lineOfPath } from "../../src/coordination/validate.js";

describe("locating problems in hand-written files", () => {
  it("finds no syntax error in any valid JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (value, pretty) => {
        expect(jsonSyntaxErrorOffset(JSON.stringify(value, null, pretty ? 2 : 0))).toBeUndefined();
      }),
    );
  });

  it("points at the first character JSON.parse would refuse", () => {
    expect(jsonSyntaxErrorOffset('{"a": 1,\n}')).toBe(9);
    expect(jsonSyntaxErrorOffset('{"a" 1}')).toBe(5);
    expect(jsonSyntaxErrorOffset("[1, 2")).toBe(5);
    expect(jsonSyntaxErrorOffset('{"a": tru}')).toBe(6);
    expect(jsonSyntaxErrorOffset('{"a": "x\ny"}')).toBe(8);
    expect(jsonSyntaxErrorOffset("{} {}")).toBe(3);
    expect(jsonSyntaxErrorOffset("")).toBe(0);
  });

  it("finds the line of a field, or of its parent when the field is missing", () => {
    const text = '{\n  "agents": {\n    "a": {\n      "status": "x"\n    }\n  }\n}\n';
    expect(lineOfPath(text, ["agents", "a", "status"])).toBe(4);
    expect(lineOfPath(text, ["agents", "a", "progress"])).toBe(3);
    expect(lineOfPath("agents:\n  - one\n  - two\n", ["agents", 1])).toBe(3);
  });
});
