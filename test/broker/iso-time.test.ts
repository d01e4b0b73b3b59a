import { describe, expect, it } from "vitest";
import { isoTime } from "../../src/broker/policy.js";

describe("isoTime (status records' timestamps)", () => {
  it("formats as Date.toISOString does, for times seen again and after more than it remembers", () => {
    const start = Date.UTC(2026, 10, 26, 3, 59, 59, 990);
    // 3,000 distinct milliseconds (past the remembered 1,024), each asked for three times, and
    // the first ones again at the end, once they were forgotten.
    const times = Array.from({ length: 3_000 }, (_, i) => start + i * 7);
    for (const ms of [...times, ...times, ...times, ...times.slice(0, 50)]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
    expect(isoTime(0)).toBe("1970-01-01T00:00:00.000Z");
  });

  it("refuses a time Date cannot format, every time it is asked", () => {
    for (const bad of [Number.NaN, 8.64e15 + 1, Number.POSITIVE_INFINITY]) {
      expect(() => isoTime(bad)).toThrow(RangeError);
      expect(() => isoTime(bad)).toThrow(RangeError);
    }
  });
});
