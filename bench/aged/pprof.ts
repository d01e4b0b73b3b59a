/**
 * A CPU profile of nats-server over one relay window, from its pprof endpoint (`--profile PORT`):
 * saved as it came (`go tool pprof` reads it) and summed here by function, so the benchmark can
 * print where nats-server spent the window without a Go toolchain on the machine.
 *
 * The file is gzipped protobuf (github.com/google/pprof, proto/profile.proto); only the fields a
 * by-function sum needs are read: samples (location ids, values), locations (their lines' function
 * ids), functions (name) and the string table.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { gunzipSync } from "node:zlib";

interface Field {
  number: number;
  /** A varint's value, or undefined for a length-delimited field. */
  value?: bigint;
  bytes?: Uint8Array;
}

class Cursor {
  private at = 0;

  constructor(private readonly buffer: Uint8Array) {}

  get done(): boolean {
    return this.at >= this.buffer.length;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = this.buffer[this.at++];
      if (byte === undefined) throw new Error("pprof: truncated varint");
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  }

  bytes(length: number): Uint8Array {
    const bytes = this.buffer.subarray(this.at, this.at + length);
    this.at += length;
    return bytes;
  }
}

function* fields(buffer: Uint8Array): Generator<Field> {
  const cursor = new Cursor(buffer);
  while (!cursor.done) {
    const key = Number(cursor.varint());
    const number = key >>> 3;
    const wireType = key & 7;
    if (wireType === 0) yield { number, value: cursor.varint() };
    else if (wireType === 2) yield { number, bytes: cursor.bytes(Number(cursor.varint())) };
    else if (wireType === 1) cursor.bytes(8);
    else if (wireType === 5) cursor.bytes(4);
    else throw new Error(`pprof: wire type ${wireType} is not protobuf`);
  }
}

/** A repeated integer field, packed (one length-delimited run) or not. */
function integers(field: Field): bigint[] {
  if (field.value !== undefined) return [field.value];
  const cursor = new Cursor(field.bytes ?? new Uint8Array());
  const values: bigint[] = [];
  while (!cursor.done) values.push(cursor.varint());
  return values;
}

export interface ProfileSummary {
  /** Seconds of CPU the samples cover. */
  cpuSeconds: number;
  /** The functions with the most CPU of their own, largest first: name and share of the total. */
  self: { name: string; share: number }[];
  /** The same, counting what the functions they called spent (each function once per stack). */
  inclusive: { name: string; share: number }[];
}

/** Sums a gzipped CPU profile by function. */
export function summarize(gzipped: Uint8Array, top = 12): ProfileSummary {
  const strings: string[] = [];
  const utf8 = new TextDecoder();
  const functionName = new Map<bigint, bigint>();
  const locationFunctions = new Map<bigint, bigint[]>();
  const samples: { locations: bigint[]; values: bigint[] }[] = [];
  let valueIndex = 0;
  let sampleTypes = 0;
  for (const field of fields(gunzipSync(gzipped))) {
    const body = field.bytes ?? new Uint8Array();
    if (field.number === 1) {
      // sample_type: the CPU time is the "cpu"/"nanoseconds" one, the last of the two Go writes.
      valueIndex = sampleTypes++;
    } else if (field.number === 2) {
      const sample = { locations: [] as bigint[], values: [] as bigint[] };
      for (const part of fields(body)) {
        if (part.number === 1) sample.locations.push(...integers(part));
        else if (part.number === 2) sample.values.push(...integers(part));
      }
      samples.push(sample);
    } else if (field.number === 4) {
      let id = 0n;
      const functions: bigint[] = [];
      for (const part of fields(body)) {
        if (part.number === 1) id = part.value ?? 0n;
        else if (part.number === 4) {
          for (const line of fields(part.bytes ?? new Uint8Array()))
            if (line.number === 1) functions.push(line.value ?? 0n);
        }
      }
      locationFunctions.set(id, functions);
    } else if (field.number === 5) {
      let id = 0n;
      let name = 0n;
      for (const part of fields(body)) {
        if (part.number === 1) id = part.value ?? 0n;
        else if (part.number === 2) name = part.value ?? 0n;
      }
      functionName.set(id, name);
    } else if (field.number === 6) {
      strings.push(utf8.decode(body));
    }
  }
  const nameOf = (fn: bigint) => strings[Number(functionName.get(fn) ?? 0n)] ?? "?";
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const sample of samples) {
    const value = Number(sample.values[valueIndex] ?? 0n);
    total += value;
    // A location's lines run from the inlined callee out to its caller; the first location is the leaf.
    const stack = sample.locations.flatMap((location) => (locationFunctions.get(location) ?? []).map(nameOf));
    const leaf = stack[0];
    if (leaf !== undefined) self.set(leaf, (self.get(leaf) ?? 0) + value);
    for (const name of new Set(stack)) inclusive.set(name, (inclusive.get(name) ?? 0) + value);
  }
  const ranked = (sums: Map<string, number>) =>
    [...sums]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, value]) => ({ name, share: total > 0 ? value / total : 0 }));
  return { cpuSeconds: total / 1e9, self: ranked(self), inclusive: ranked(inclusive) };
}

/**
 * Takes nats-server's CPU profile for `seconds` (its pprof endpoint on `port`), saves it to `file`
 * and prints the functions it spent the most in.
 */
export async function profileNats(port: number, seconds: number, file: string, label: string): Promise<void> {
  const answer = await fetch(`http://127.0.0.1:${port}/debug/pprof/profile?seconds=${seconds}`);
  if (!answer.ok) throw new Error(`nats-server profile: HTTP ${answer.status}`);
  const gzipped = new Uint8Array(await answer.arrayBuffer());
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, gzipped);
  const summary = summarize(gzipped);
  const shares = (list: ProfileSummary["self"]) =>
    list.map(({ name, share }) => `${(share * 100).toFixed(1)}% ${name.replace(/^.*\//, "")}`).join(", ");
  console.log(
    `  nats-server CPU profile, ${label}: ${summary.cpuSeconds.toFixed(2)} s of CPU in ${seconds} s (${file})`,
  );
  console.log(`    own time: ${shares(summary.self)}`);
  console.log(`    with callees: ${shares(summary.inclusive)}`);
}
