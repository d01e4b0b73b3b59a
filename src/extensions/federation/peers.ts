/**
 * The peers an admin admitted or blocked (bucket `federation-peers`, key = domain, shared by every
 * gateway on one NATS), held in memory and kept current by the bucket's watch. Each peer's pinned
 * keys are the only ones its requests and records may be signed with; keys its `/.well-known/acp`
 * shows beyond them wait as `pending` until an admin accepts them.
 */
import { isBrokerError, isWriteConflict } from "../../broker/errors.js";
import type { Broker, KvBucket, Unsubscribe } from "../../broker/index.js";
import { AcpError } from "../../protocol/index.js";
import type { GatewayKey } from "../../wire/federation.js";

export interface PeerRecord {
  domain: string;
  state: "allowed" | "blocked";
  /** Where its `/.well-known/acp` is: `https://<domain>` unless the admin gave another. */
  url: string;
  /** Its federation endpoint, from its `/.well-known/acp`. */
  endpoint?: string;
  admittedBy: "admin" | "open-policy";
  pinned: GatewayKey[];
  pending?: { keys: GatewayKey[]; seenAt: string };
  addedAt: string;
}

/** Most peers a gateway keeps (every one costs a forwarder): past it, adding one is refused. */
export const MAX_PEERS = 1000;

export type PeerListener = (domain: string, record: PeerRecord | null) => void;

export class PeerStore {
  private readonly bucket: KvBucket<PeerRecord>;
  private readonly peers = new Map<string, PeerRecord>();
  private readonly listeners = new Set<PeerListener>();
  private unwatch: Unsubscribe | undefined;

  constructor(broker: Broker) {
    this.bucket = broker.kv<PeerRecord>("federation-peers");
  }

  async start(): Promise<void> {
    this.unwatch = await this.bucket.watch((change) => {
      if (change.value) this.peers.set(change.key, change.value);
      else this.peers.delete(change.key);
      for (const listener of this.listeners) listener(change.key, change.value);
    });
    for (const domain of await this.bucket.keys()) {
      const entry = await this.bucket.get(domain);
      if (entry) this.peers.set(domain, entry.value);
    }
  }

  stop(): void {
    this.unwatch?.();
    this.listeners.clear();
  }

  /** Called with each peer that changes (here or at another gateway of the same NATS). */
  onChange(listener: PeerListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get(domain: string): PeerRecord | undefined {
    return this.peers.get(domain);
  }

  list(): PeerRecord[] {
    return [...this.peers.values()].sort((a, b) => a.domain.localeCompare(b.domain));
  }

  /** Creates the peer, or fails with Conflict when it exists. */
  async create(record: PeerRecord): Promise<PeerRecord> {
    if (this.peers.size >= MAX_PEERS) {
      throw new AcpError("RateLimited", `this gateway keeps at most ${MAX_PEERS} peers`, {
        quota: "federation-peers",
        limit: MAX_PEERS,
      });
    }
    try {
      await this.bucket.create(record.domain, record);
    } catch (err) {
      if (isBrokerError(err, "exists")) {
        throw new AcpError(
          "Conflict",
          `${record.domain} is already a peer; remove it first to add it again`,
          {
            problems: [{ path: "/domain", message: "already a peer" }],
          },
        );
      }
      throw err;
    }
    this.peers.set(record.domain, record);
    return record;
  }

  /** Changes a peer with compare-and-set (retried); NotFound when it does not exist. */
  async update(domain: string, change: (current: PeerRecord) => PeerRecord): Promise<PeerRecord> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const entry = await this.bucket.get(domain);
      if (!entry) throw notAPeer(domain);
      const next = change(entry.value);
      try {
        await this.bucket.update(domain, next, entry.revision);
        this.peers.set(domain, next);
        return next;
      } catch (err) {
        if (!isWriteConflict(err)) throw err;
      }
    }
    throw new AcpError("Conflict", `${domain} changed concurrently; retry`);
  }

  async remove(domain: string): Promise<void> {
    if (!(await this.bucket.get(domain))) throw notAPeer(domain);
    await this.bucket.delete(domain);
    this.peers.delete(domain);
  }
}

export function notAPeer(domain: string): AcpError {
  return new AcpError("NotFound", `${domain} is not a peer of this gateway`, {
    problems: [{ path: "/domain", message: "not a peer" }],
  });
}
