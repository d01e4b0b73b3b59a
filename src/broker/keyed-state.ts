/**
 * The broker's keyed JSON state (`Broker.kv`): buckets of values with revisions, compare-and-set
 * writes and a change feed. Both drivers implement `KvBucket` (embedded: a SQLite table; NATS: a
 * JetStream KV bucket).
 */

export interface KvEntry<T> {
  key: string;
  value: T;
  /** Changes on every write; pass to `update` for compare-and-set. */
  revision: number;
}

export interface KvChange<T> {
  bucket: string;
  key: string;
  op: "put" | "delete";
  /** The new value; null for a delete. */
  value: T | null;
  revision: number;
}

export type Unsubscribe = () => void;

/**
 * Keyed JSON state (registry, presence, handshake state, …). Bucket names: `[A-Za-z0-9_-]{1,64}`.
 * Keys: `[A-Za-z0-9_=/.-]`, 1..256 characters, not starting or ending with `.`.
 */
export interface KvBucket<T = unknown> {
  readonly name: string;
  /** The key's value and revision, or null when it does not exist (or was deleted). */
  get(key: string): Promise<KvEntry<T> | null>;
  /** Writes unconditionally; returns the new revision. */
  put(key: string, value: T): Promise<number>;
  /** Writes only if the key does not exist; BrokerError `exists` otherwise. */
  create(key: string, value: T): Promise<number>;
  /** Writes only if the key is still at `expectedRevision`; BrokerError `conflict` otherwise. */
  update(key: string, value: T, expectedRevision: number): Promise<number>;
  /** Removes the key (watchers see a delete); removing a missing key is harmless. */
  delete(key: string): Promise<void>;
  /** Live keys, sorted; only those starting with `prefix` when given. */
  keys(prefix?: string): Promise<string[]>;
  /** Changes made after the returned promise resolves, in order. */
  watch(handler: (change: KvChange<T>) => void, options?: { prefix?: string }): Promise<Unsubscribe>;
}
