import type { Broker, KvBucket, KvEntry } from "../../broker/index.js";
import { isWriteConflict } from "../../broker/errors.js";
import { AcpError } from "../../protocol/index.js";
import { BALLOTS_PREFIX, type Ballot, type Vote } from "../../collab/votes.js";

/** The KV buckets of the collaboration module; every piece of its state lives in one of these. */
export const COLLAB_BUCKETS = {
  negotiations: "collab-negotiations",
  handoffs: "collab-handoffs",
  ledger: "collab-ledger",
  teams: "collab-teams",
  votes: "collab-votes",
  knowledge: "collab-knowledge",
  disputes: "collab-disputes",
  status: "collab-status",
} as const;

export function bucketOf<T>(broker: Broker, name: keyof typeof COLLAB_BUCKETS): KvBucket<T> {
  return broker.kv<T>(COLLAB_BUCKETS[name]);
}

export interface Mutation<T> {
  /** The entry before the change (null when the key was created). */
  before: KvEntry<T> | null;
  value: T;
  revision: number;
}

/**
 * Read-modify-write with compare-and-set, retried when another writer (this gateway or another one
 * on the same NATS) got there first. `change` sees the current value and returns the next one, or
 * throws to refuse; it must be pure because it may run more than once.
 */
export async function mutate<T>(
  bucket: KvBucket<T>,
  key: string,
  change: (current: T | undefined) => T,
  attempts = 16,
): Promise<Mutation<T>> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const before = await bucket.get(key);
    const value = change(before?.value);
    try {
      const revision = before
        ? await bucket.update(key, value, before.revision)
        : await bucket.create(key, value);
      return { before, value, revision };
    } catch (err) {
      if (!isWriteConflict(err)) throw err;
    }
  }
  throw new AcpError("Conflict", `${bucket.name}/${key} keeps changing concurrently; retry`);
}

/**
 * Undoes a mutation whose message could not be relayed, unless someone changed the key since
 * (then their change stands, and the caller's error says what failed).
 */
export async function undo<T>(bucket: KvBucket<T>, key: string, mutation: Mutation<T>): Promise<void> {
  try {
    if (mutation.before) await bucket.update(key, mutation.before.value, mutation.revision);
    else {
      const current = await bucket.get(key);
      if (current?.revision === mutation.revision) await bucket.delete(key);
    }
  } catch (err) {
    if (!isWriteConflict(err)) throw err;
  }
}

/** Every value under a key prefix (order of keys). */
export async function listValues<T>(bucket: KvBucket<T>, prefix: string): Promise<T[]> {
  const keys = await bucket.keys(prefix);
  const entries = await Promise.all(keys.map((key) => bucket.get(key)));
  return entries.flatMap((entry) => (entry ? [entry.value] : []));
}

/**
 * The ballots of a vote. A vote id from before ids had namespaces (`alice-agent`) can share a key
 * prefix with one of its creator's (`alice-agent.<uuid>`), so the prefix alone does not decide.
 */
export async function ballotsOf(bucket: KvBucket<Vote | Ballot>, voteId: string): Promise<Ballot[]> {
  return ((await listValues(bucket, BALLOTS_PREFIX(voteId))) as Ballot[]).filter((b) => b.voteId === voteId);
}
