import type { Broker, KvBucket } from "../broker/index.js";
import { isWriteConflict } from "../broker/errors.js";
import { WatchedReads } from "../broker/watched-reads.js";
import type { Presence, PresenceUpdate } from "../wire/api.js";

/** What is stored per agent (bucket `presence`); `state` here is what the agent chose. */
interface StoredPresence extends Omit<Presence, "state"> {
  state: "online" | "busy" | "away";
}

const DEFAULT: Omit<StoredPresence, "lastSeen"> = {
  state: "online",
  load: 0,
  metrics: { responseTimeMs: 0, errorRate: 0 },
  activeTasks: 0,
  tasks: [],
  connections: 0,
};

/**
 * Presence from connections and heartbeats (the ACP messaging platform): an agent is online while it has a
 * WebSocket open and heartbeats arrive; busy/away are its own choice; load, health metrics and tasks are what
 * it reports. A gateway that dies cannot decrement its connection count, so an agent whose last heartbeat is
 * older than `staleAfterMs` reads as offline whatever the count says.
 */
export class PresenceTracker {
  private readonly bucket: KvBucket<StoredPresence>;
  private readonly lastWrite = new Map<string, number>();
  /** What `get` reads: changes (heartbeats, connects, any gateway's) drop an agent's entry. */
  private readonly reads: WatchedReads<StoredPresence | null>;

  constructor(
    broker: Broker,
    private readonly heartbeatMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.bucket = broker.kv<StoredPresence>("presence");
    this.reads = new WatchedReads<StoredPresence | null>(this.bucket, { max: 10_000 });
  }

  get staleAfterMs(): number {
    return this.heartbeatMs * 3;
  }

  connected(agentId: string): Promise<void> {
    return this.change(agentId, (p) => ({ ...p, connections: p.connections + 1 }));
  }

  disconnected(agentId: string): Promise<void> {
    return this.change(agentId, (p) => ({ ...p, connections: Math.max(0, p.connections - 1) }));
  }

  /** A heartbeat refreshes lastSeen, written at most once per heartbeat interval. */
  async heartbeat(agentId: string): Promise<void> {
    const last = this.lastWrite.get(agentId) ?? 0;
    if (this.now() - last < this.heartbeatMs / 2) return;
    await this.change(agentId, (p) => p);
  }

  update(agentId: string, update: PresenceUpdate): Promise<void> {
    return this.change(agentId, (p) => ({ ...p, ...update }));
  }

  async get(agentId: string): Promise<Presence> {
    const stored = await this.reads.read(
      agentId,
      async () => (await this.bucket.get(agentId))?.value ?? null,
    );
    // A copy: the cached record is shared by every later read.
    return this.effective(stored === null ? undefined : structuredClone(stored));
  }

  /** Stops following changes (the gateway is closing). */
  close(): void {
    this.reads.close();
  }

  effective(stored: StoredPresence | undefined): Presence {
    if (!stored) return { ...DEFAULT, state: "offline", lastSeen: new Date(0).toISOString() };
    const stale = this.now() - Date.parse(stored.lastSeen) > this.staleAfterMs;
    return { ...stored, state: stored.connections === 0 || stale ? "offline" : stored.state };
  }

  private async change(agentId: string, apply: (p: StoredPresence) => StoredPresence): Promise<void> {
    for (let attempt = 0; attempt < 8; attempt++) {
      const entry = await this.bucket.get(agentId);
      const current = entry?.value ?? { ...DEFAULT, lastSeen: new Date(this.now()).toISOString() };
      const next = { ...apply(current), lastSeen: new Date(this.now()).toISOString() };
      try {
        if (entry) await this.bucket.update(agentId, next, entry.revision);
        else await this.bucket.create(agentId, next);
        this.lastWrite.set(agentId, this.now());
        return;
      } catch (err) {
        if (!isWriteConflict(err)) throw err;
      }
    }
  }
}
