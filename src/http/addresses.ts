/**
 * What kind of address an IP address is (the IANA special-purpose registries, RFC 6890 and its
 * updates), and address ranges an operator names (`10.1.0.0/16`, `fd00::/8`, `192.0.2.7`). The
 * outbound URL policy (outbound.ts) refuses every kind but `public` unless allowed. IPv6 forms that
 * carry an IPv4 address (mapped `::ffff:0:0/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are the
 * kind of the IPv4 address they carry: `::ffff:127.0.0.1` is loopback.
 */
import { isIP } from "node:net";

export type AddressKind =
  | "public"
  | "loopback"
  | "private"
  | "link-local"
  | "shared"
  | "benchmarking"
  | "unique-local"
  | "unspecified"
  | "multicast"
  | "reserved";

/** How each kind is named in a refusal. */
export const KIND_NAMES: Record<AddressKind, string> = {
  public: "a public address",
  loopback: "a loopback address",
  private: "a private address",
  "link-local": "a link-local address",
  shared: "a shared (carrier-grade NAT) address",
  benchmarking: "a benchmarking address",
  "unique-local": "a unique-local address",
  unspecified: "the unspecified address",
  multicast: "a multicast address",
  reserved: "a reserved, documentation or broadcast address",
};

/** An address as bytes: 4 for IPv4, 16 for IPv6. */
type Bytes = Uint8Array;

interface Range {
  bytes: Bytes;
  prefix: number;
}

const V4_KINDS: [string, number, AddressKind][] = [
  ["0.0.0.0", 8, "unspecified"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "shared"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "reserved"],
  ["192.88.99.0", 24, "reserved"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "benchmarking"],
  ["198.51.100.0", 24, "reserved"],
  ["203.0.113.0", 24, "reserved"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"],
];

/** IPv6 ranges, most specific first; the ones carrying IPv4 are handled before these. */
const V6_KINDS: [string, number, AddressKind][] = [
  ["::", 128, "unspecified"],
  ["::1", 128, "loopback"],
  ["::", 96, "reserved"], // IPv4-compatible (deprecated)
  ["64:ff9b:1::", 48, "private"], // local-use NAT64
  ["100::", 64, "reserved"], // discard
  ["2001:db8::", 32, "reserved"], // documentation
  ["2001::", 23, "reserved"], // IETF protocol assignments (Teredo among them)
  ["fc00::", 7, "unique-local"],
  ["fe80::", 10, "link-local"],
  ["fec0::", 10, "unique-local"], // site-local (deprecated)
  ["ff00::", 8, "multicast"],
  ["2000::", 3, "public"],
];

const parsedV4 = V4_KINDS.map(([address, prefix, kind]) => ({ range: rangeOf(address, prefix), kind }));
const parsedV6 = V6_KINDS.map(([address, prefix, kind]) => ({ range: rangeOf(address, prefix), kind }));
const MAPPED = rangeOf("::ffff:0:0", 96);
const NAT64 = rangeOf("64:ff9b::", 96);
const SIX_TO_FOUR = rangeOf("2002::", 16);

/** The kind of `address` (an IPv4 or IPv6 literal, brackets and a zone allowed); throws if it is none. */
export function addressKind(address: string): AddressKind {
  return kindOfBytes(bytesOf(address));
}

function kindOfBytes(bytes: Bytes): AddressKind {
  if (bytes.length === 4) return parsedV4.find(({ range }) => within(bytes, range))?.kind ?? "public";
  const carried = carriedV4(bytes);
  if (carried) return kindOfBytes(carried);
  return parsedV6.find(({ range }) => within(bytes, range))?.kind ?? "reserved";
}

/** The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), if any. */
function carriedV4(bytes: Bytes): Bytes | undefined {
  if (within(bytes, MAPPED) || within(bytes, NAT64)) return bytes.slice(12, 16);
  if (within(bytes, SIX_TO_FOUR)) return bytes.slice(2, 6);
  return undefined;
}

/**
 * Ranges an operator allows, each `address` or `address/prefix`; throws a TypeError naming the
 * first one that is not a range.
 */
export class AddressRanges {
  readonly #ranges: Range[];

  constructor(specs: readonly string[]) {
    this.#ranges = specs.map((spec) => {
      const [address = "", prefix, ...rest] = spec.trim().split("/");
      const family = isIP(address);
      const bits = prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix);
      if (
        family === 0 ||
        rest.length > 0 ||
        !Number.isInteger(bits) ||
        bits < 0 ||
        bits > (family === 4 ? 32 : 128) ||
        (prefix !== undefined && !/^\d+$/.test(prefix))
      ) {
        throw new TypeError(
          `${JSON.stringify(spec)} is not an address range (e.g. 10.1.0.0/16, fd00::/8, 192.0.2.7)`,
        );
      }
      return rangeOf(address, bits);
    });
  }

  /** Whether `address` is in one of the ranges (an IPv6 address carrying IPv4 is matched as that IPv4). */
  has(address: string): boolean {
    const bytes = bytesOf(address);
    const carried = bytes.length === 16 ? carriedV4(bytes) : undefined;
    return this.#ranges.some(
      (range) => within(bytes, range) || (carried !== undefined && within(carried, range)),
    );
  }
}

function rangeOf(address: string, prefix: number): Range {
  return { bytes: bytesOf(address), prefix };
}

function within(bytes: Bytes, range: Range): boolean {
  if (bytes.length !== range.bytes.length) return false;
  let bits = range.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] as number) & mask) !== ((range.bytes[i] as number) & mask)) return false;
  }
  return true;
}

/** The bytes of an IPv4 or IPv6 literal (`[…]` and a `%zone` allowed). */
function bytesOf(literal: string): Bytes {
  const address = literal.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const family = isIP(address);
  if (family === 4) return Uint8Array.from(address.split(".").map(Number));
  if (family !== 6) throw new TypeError(`${JSON.stringify(literal)} is not an IP address`);
  // A trailing dotted IPv4 stands for the last two groups.
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = (dotted[1] as string).split(".").map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const groupsOf = (part: string) => (part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16)));
  const front = groupsOf(head);
  const back = tail === undefined ? [] : groupsOf(tail);
  const groups = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}
