/**
 * The protocol versions a gateway supports, and how they age: `current` (speak it), `deprecated`
 * (still spoken, announced with a sunset date) and `retired` (refused). A deprecated version reads
 * as retired once its sunset has passed. The SDK and the gateway share this contract;
 * docs/protocol.md section 10 states the policy.
 */

export type VersionStatus = "current" | "deprecated" | "retired";

export interface ProtocolVersionEntry {
  /** `major.minor.patch`. */
  version: string;
  status: VersionStatus;
  /** When it was deprecated (ISO 8601); required for a deprecated version. */
  deprecatedAt?: string;
  /** When it is blocked (ISO 8601); default `deprecatedAt` + 180 days. */
  sunsetAt?: string;
}

/** A version as the gateway announces it at a given time (`GET /api/v1/versions`). */
export interface ProtocolVersionView {
  version: string;
  status: VersionStatus;
  deprecatedAt?: string;
  sunsetAt?: string;
}

/** What an agent speaking a deprecated version is told (headers, the WebSocket `ready` frame). */
export interface VersionDeprecation {
  version: string;
  deprecatedAt: string;
  sunsetAt: string;
}

/** The platform flavour: "Deprecated versions have 180-day sunset period before blocking." */
export const DEFAULT_SUNSET_DAYS = 180;
/** The platform flavour: "At least 2 major versions of backward compatibility maintained." */
export const COMPATIBLE_MAJORS_BACK = 2;
/** The versions this implementation speaks: the core flavour's trust protocol 1.0.0. */
export const PROTOCOL_VERSIONS: readonly ProtocolVersionEntry[] = [{ version: "1.0.0", status: "current" }];

const DAY_MS = 86_400_000;
const SEMVER = /^(\d+)\.(\d+)\.(\d+)$/;

function parts(version: string): number[] {
  return version.split(".").map(Number);
}

/** Semver order, newest first. */
export function compareVersionsDescending(x: string, y: string): number {
  const [p, q] = [parts(x), parts(y)];
  for (let i = 0; i < 3; i++) if ((p[i] ?? 0) !== (q[i] ?? 0)) return (q[i] ?? 0) - (p[i] ?? 0);
  return 0;
}

/** Highest protocol version both agents support (semver order), or undefined. */
export function negotiateVersion(a: readonly string[], b: readonly string[]): string | undefined {
  const theirs = new Set(b);
  return a.filter((v) => theirs.has(v)).sort(compareVersionsDescending)[0];
}

interface Resolved {
  status: VersionStatus;
  deprecatedAt?: number;
  sunsetAt?: number;
}

/**
 * A checked version table. `of` refuses a table that breaks the compatibility policy: no current
 * version, a deprecated one without its date, a sunset before its deprecation, or the newest
 * version of the current major or of one of the two majors before it deprecated or retired.
 */
export class ProtocolVersions {
  private readonly byVersion: Map<string, Resolved>;

  private constructor(byVersion: Map<string, Resolved>) {
    this.byVersion = byVersion;
  }

  static of(entries: readonly ProtocolVersionEntry[] = PROTOCOL_VERSIONS): ProtocolVersions {
    const byVersion = new Map<string, Resolved>();
    entries.forEach((entry, index) => {
      const at = (field: string) => `protocol versions[${index}].${field}`;
      if (!SEMVER.test(entry.version))
        throw new TypeError(`${at("version")}: must be a version such as 1.0.0`);
      if (byVersion.has(entry.version))
        throw new TypeError(`${at("version")}: ${entry.version} is listed twice`);
      const resolved: Resolved = { status: entry.status };
      if (entry.status === "deprecated") {
        const deprecatedAt = Date.parse(entry.deprecatedAt ?? "");
        if (Number.isNaN(deprecatedAt))
          throw new TypeError(`${at("deprecatedAt")}: a deprecated version needs its date`);
        const sunsetAt =
          entry.sunsetAt === undefined
            ? deprecatedAt + DEFAULT_SUNSET_DAYS * DAY_MS
            : Date.parse(entry.sunsetAt);
        if (Number.isNaN(sunsetAt) || sunsetAt <= deprecatedAt)
          throw new TypeError(`${at("sunsetAt")}: must be a date after deprecatedAt`);
        Object.assign(resolved, { deprecatedAt, sunsetAt });
      } else if (entry.deprecatedAt !== undefined || entry.sunsetAt !== undefined) {
        throw new TypeError(`${at("status")}: only a deprecated version has deprecatedAt and sunsetAt`);
      }
      byVersion.set(entry.version, resolved);
    });
    const current = [...byVersion].filter(([, r]) => r.status === "current").map(([v]) => v);
    if (current.length === 0) throw new TypeError("protocol versions: at least one must be current");
    const newestMajor = Math.max(...current.map((v) => parts(v)[0] ?? 0));
    for (let major = newestMajor - COMPATIBLE_MAJORS_BACK; major <= newestMajor; major++) {
      const newest = [...byVersion.keys()]
        .filter((v) => parts(v)[0] === major)
        .sort(compareVersionsDescending)[0];
      if (newest !== undefined && byVersion.get(newest)?.status !== "current") {
        throw new TypeError(
          `protocol versions: ${newest} is the newest of major ${major}, which must stay supported (${COMPATIBLE_MAJORS_BACK} majors back): it must be current`,
        );
      }
    }
    return new ProtocolVersions(byVersion);
  }

  /** Deprecated versions read as retired from their sunset on; a version not listed is unknown. */
  statusAt(version: string, nowMs = Date.now()): VersionStatus | "unknown" {
    const entry = this.byVersion.get(version);
    if (!entry) return "unknown";
    if (entry.status === "deprecated" && nowMs >= (entry.sunsetAt ?? 0)) return "retired";
    return entry.status;
  }

  /** The versions of `declared` that may still be spoken, in the order given. */
  usable(declared: readonly string[], nowMs = Date.now()): string[] {
    return declared.filter((version) => {
      const status = this.statusAt(version, nowMs);
      return status === "current" || status === "deprecated";
    });
  }

  /** Every version that may still be spoken (current, or deprecated before its sunset), newest first. */
  spoken(nowMs = Date.now()): string[] {
    return this.usable([...this.byVersion.keys()], nowMs).sort(compareVersionsDescending);
  }

  /** The newest current version: what an agent that declares none is registered with. */
  get newest(): string {
    return [...this.byVersion]
      .filter(([, r]) => r.status === "current")
      .map(([v]) => v)
      .sort(compareVersionsDescending)[0] as string;
  }

  /**
   * The deprecation an agent declaring `declared` is to be told of: when the newest version it may
   * still speak is deprecated (it speaks no newer one), that version's dates; else undefined.
   */
  deprecationOf(declared: readonly string[], nowMs = Date.now()): VersionDeprecation | undefined {
    const best = this.usable(declared, nowMs).sort(compareVersionsDescending)[0];
    const entry = best === undefined ? undefined : this.byVersion.get(best);
    if (best === undefined || entry?.status !== "deprecated") return undefined;
    return {
      version: best,
      deprecatedAt: new Date(entry.deprecatedAt ?? 0).toISOString(),
      sunsetAt: new Date(entry.sunsetAt ?? 0).toISOString(),
    };
  }

  /** The table as agents are told it now, newest first. */
  view(nowMs = Date.now()): ProtocolVersionView[] {
    return [...this.byVersion]
      .sort(([x], [y]) => compareVersionsDescending(x, y))
      .map(([version, entry]) => ({
        version,
        status: this.statusAt(version, nowMs) as VersionStatus,
        ...(entry.deprecatedAt !== undefined
          ? { deprecatedAt: new Date(entry.deprecatedAt).toISOString() }
          : {}),
        ...(entry.sunsetAt !== undefined ? { sunsetAt: new Date(entry.sunsetAt).toISOString() } : {}),
      }));
  }
}

/** RFC 9745 `Deprecation` (a structured-field date, `@` Unix seconds) and RFC 8594 `Sunset` (an HTTP-date). */
export function deprecationHeaders(deprecation: VersionDeprecation): Record<string, string> {
  return {
    deprecation: `@${Math.floor(Date.parse(deprecation.deprecatedAt) / 1000)}`,
    sunset: new Date(deprecation.sunsetAt).toUTCString(),
  };
}
