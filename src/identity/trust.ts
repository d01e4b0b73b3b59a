/**
 * Trust calibration (the ACP core protocol, handshake step 4). Initial trust comes from what is known before
 * any exchange: a known principal, a shared context between the principals, and the peer's declared skill
 * layers. It is then recalibrated continuously from observed behaviour: bad signatures, timeouts and rejected
 * requests lower it; a clean history raises it slowly, up to a cap set by the basis. Everything is plain
 * data, so a policy can read and act on it.
 */
export type TrustLevel = "untrusted" | "baseline" | "elevated" | "high";

export type TrustObservation = "bad-signature" | "timeout" | "rejected-request" | "clean-exchange";

export interface TrustBasis {
  /** The peer's principal is one this agent's principal recognises. */
  knownPrincipal: boolean;
  /** The two principals have an established relationship. */
  sharedContext: boolean;
  /** The peer's declared skill-layers-loaded. */
  layers: number[];
}

export interface TrustRecord {
  peer: string;
  principalId: string;
  score: number;
  level: TrustLevel;
  /** The most a clean history can raise the score to, given the basis. */
  cap: number;
  basis: TrustBasis;
  observations: Record<TrustObservation, number>;
  updatedAt: string;
}

export interface TrustPolicy {
  knownPrincipals?: Iterable<string>;
  sharedContextPrincipals?: Iterable<string>;
}

const EFFECT: Record<TrustObservation, number> = {
  "bad-signature": -0.3,
  timeout: -0.05,
  "rejected-request": -0.05,
  "clean-exchange": 0.01,
};

/** The level a trust score (0..1) falls in, from `untrusted` up. */
export function trustLevel(score: number): TrustLevel {
  if (score < 0.2) return "untrusted";
  if (score < 0.45) return "baseline";
  if (score < 0.7) return "elevated";
  return "high";
}

const round = (n: number) => Math.round(n * 1000) / 1000;

/** The starting score and cap for a basis: unknown principals start at baseline. */
export function initialTrust(basis: TrustBasis): { score: number; cap: number } {
  let score = 0.3;
  if (basis.knownPrincipal) score += 0.25;
  if (basis.sharedContext) score += 0.15;
  // Each layer above the foundation is a behavioural commitment (fiduciary duty, coordination…).
  const committed = new Set(basis.layers.filter((layer) => layer > 0)).size;
  score += Math.min(committed, 3) * 0.03;
  if (basis.layers.length === 0) score = Math.min(score, 0.15);
  const cap = basis.knownPrincipal ? 0.95 : basis.sharedContext ? 0.8 : 0.6;
  return { score: round(Math.min(score, cap)), cap };
}

/**
 * An agent's trust in each peer: set from the basis when a handshake establishes the relationship
 * (`establish`), then moved by what is observed (`observe`); `AcpAgent` keeps one for its peers.
 */
export class TrustLedger {
  private readonly records = new Map<string, TrustRecord>();
  private readonly known: Set<string>;
  private readonly shared: Set<string>;

  constructor(
    policy: TrustPolicy = {},
    private readonly now: () => Date = () => new Date(),
  ) {
    this.known = new Set(policy.knownPrincipals ?? []);
    this.shared = new Set(policy.sharedContextPrincipals ?? []);
  }

  /** Step 4 of the handshake: (re)calibrates the initial trust for a peer. */
  establish(peer: string, principalId: string, layers: number[]): TrustRecord {
    const basis: TrustBasis = {
      knownPrincipal: this.known.has(principalId),
      sharedContext: this.shared.has(principalId),
      layers: [...layers],
    };
    const { score, cap } = initialTrust(basis);
    const previous = this.records.get(peer);
    const record: TrustRecord = {
      peer,
      principalId,
      // A new handshake never launders a bad history: keep the lower of the two scores.
      score: previous ? Math.min(previous.score, score) : score,
      level: "baseline",
      cap,
      basis,
      observations: previous?.observations ?? {
        "bad-signature": 0,
        timeout: 0,
        "rejected-request": 0,
        "clean-exchange": 0,
      },
      updatedAt: this.now().toISOString(),
    };
    record.level = trustLevel(record.score);
    this.records.set(peer, record);
    return structuredClone(record);
  }

  /**
   * Recalibrates `peer`'s score by one observed exchange (a clean one raises it a little, a failure
   * lowers it), within the cap of its basis. Undefined for a peer with no record yet.
   */
  observe(peer: string, observation: TrustObservation): TrustRecord | undefined {
    const record = this.records.get(peer);
    if (!record) return undefined;
    record.observations[observation]++;
    record.score = round(Math.max(0, Math.min(record.cap, record.score + EFFECT[observation])));
    record.level = trustLevel(record.score);
    record.updatedAt = this.now().toISOString();
    return structuredClone(record);
  }

  /** A copy of `peer`'s trust record, if it has one. */
  get(peer: string): TrustRecord | undefined {
    const record = this.records.get(peer);
    return record ? structuredClone(record) : undefined;
  }

  /** Copies of every peer's trust record. */
  list(): TrustRecord[] {
    return [...this.records.values()].map((record) => structuredClone(record));
  }
}
