import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { summarize } from "../../bench/aged/pprof.js";

/** Protobuf, as much as a pprof profile uses: varints and length-delimited fields. */
const varint = (value: number): number[] => {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return bytes;
};
const int = (field: number, value: number) => [...varint(field << 3), ...varint(value)];
const bytes = (field: number, body: number[]) => [
  ...varint((field << 3) | 2),
  ...varint(body.length),
  ...body,
];
const packed = (field: number, values: number[]) => bytes(field, values.flatMap(varint));
const text = (field: number, value: string) => bytes(field, [...Buffer.from(value)]);

const STRINGS = ["", "samples", "count", "cpu", "nanoseconds", "main.leaf", "main.caller", "main.inlined"];
const MS = 1_000_000;

/**
 * Three samples: leaf ← caller (10 ms), inlined ← caller in one location (30 ms), caller alone
 * (60 ms); sample types as Go writes them, CPU nanoseconds second.
 */
function profile(): Buffer {
  const fields = [
    ...bytes(1, [...int(1, 1), ...int(2, 2)]),
    ...bytes(1, [...int(1, 3), ...int(2, 4)]),
    ...bytes(2, [...packed(1, [1, 2]), ...packed(2, [1, 10 * MS])]),
    // Unpacked, as a writer may also send a repeated field.
    ...bytes(2, [...int(1, 3), ...int(2, 3), ...int(2, 30 * MS)]),
    ...bytes(2, [...packed(1, [2]), ...packed(2, [6, 60 * MS])]),
    ...bytes(4, [...int(1, 1), ...bytes(4, [...int(1, 1), ...int(2, 10)])]),
    ...bytes(4, [...int(1, 2), ...bytes(4, [...int(1, 2), ...int(2, 20)])]),
    ...bytes(4, [...int(1, 3), ...bytes(4, [...int(1, 3)]), ...bytes(4, [...int(1, 2)])]),
    ...bytes(5, [...int(1, 1), ...int(2, 5)]),
    ...bytes(5, [...int(1, 2), ...int(2, 6)]),
    ...bytes(5, [...int(1, 3), ...int(2, 7)]),
    ...STRINGS.flatMap((value) => text(6, value)),
  ];
  return gzipSync(Buffer.from(fields));
}

describe("the aged benchmark's pprof summary", () => {
  it("sums CPU by function: its own time at the leaf, with callees once per stack, inlined frames included", () => {
    const summary = summarize(profile());
    expect(summary.cpuSeconds).toBeCloseTo(0.1, 9);
    expect(summary.self).toEqual([
      { name: "main.caller", share: 0.6 },
      { name: "main.inlined", share: 0.3 },
      { name: "main.leaf", share: 0.1 },
    ]);
    expect(summary.inclusive).toEqual([
      { name: "main.caller", share: 1 },
      { name: "main.inlined", share: 0.3 },
      { name: "main.leaf", share: 0.1 },
    ]);
  });

  it("refuses what is not a profile", () => {
    expect(() => summarize(gzipSync(Buffer.from([0x0f])))).toThrow(/wire type 7/);
    expect(() => summarize(gzipSync(Buffer.from([0x08, 0x80])))).toThrow(/truncated/);
  });
});
