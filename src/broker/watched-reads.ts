/**
 * Reads of one KV bucket kept in memory, for state read far more often than it changes: presence
 * (read at every A2A call), the A2A task records and push configs (the A2A SDK's request handler
 * reloads a task from its store at every event of a call). A KV read costs tens of microseconds
 * even on the embedded broker (a SQLite read and a JSON parse) and a network round trip on NATS.
 *
 * Writes still go to the broker first; callers `remember` what they wrote. A change made anywhere
 * else (another gateway on the same NATS, the retention sweep) reaches this cache through the
 * bucket's watch and drops the entry, and a read that such a change overtook is not kept, so a
 * cached value is never older than the last change this gateway was told of. Between a change on
 * another gateway and its watch event a read here can still be stale: callers that must not act on
 * a stale value write with a compare-and-set on the revision they read.
 */
import type { KvBucket, KvChange, Unsubscribe } from "./types.js";

export interface WatchedReadsOptions<V> {
  /** Most entries kept; the least recently used go first. */
  max: number;
  /** The cache entry a changed bucket key belongs to (default: the key itself). */
  entryOf?(changedKey: string): string;
  /** True when the cached value already includes the change at `revision` (our own write). */
  includes?(cached: V, revision: number): boolean;
  /**
   * Longest an entry is used before it is read again (default 60 s). The watch keeps entries
   * current; this bounds the damage should a watch ever end without a word.
   */
  maxAgeMs?: number;
  /** The clock (tests). */
  now?(): number;
}

const DEFAULT_MAX_AGE_MS = 60_000;

export class WatchedReads<V> {
  /** Values, when they were read or written, and when last moved to the recently used end (ms). */
  readonly #values = new Map<string, { value: V; at: number; used: number }>();
  /** Keys being read from the broker, and whether a change arrived meanwhile. */
  readonly #reading = new Map<string, { readers: number; overtaken: boolean }>();
  #watching: Promise<Unsubscribe | undefined> | undefined;
  /** The watch is live: changes made from now on reach `#changed`. */
  #live = false;
  #closed = false;

  constructor(
    private readonly bucket: KvBucket<unknown>,
    private readonly options: WatchedReadsOptions<V>,
  ) {}

  get size(): number {
    return this.#values.size;
  }

  /** Starts following the bucket now (otherwise at the first read); rejects if the watch cannot start. */
  async start(): Promise<void> {
    if (!(await this.#watch())) throw new Error(`cannot watch KV bucket ${this.bucket.name}`);
  }

  /** The cached value of `key`, or `load()`'s (kept unless a change overtook it). */
  async read(key: string, load: () => Promise<V>): Promise<V> {
    // Without a live watch nothing is cached: a value could go stale unseen.
    if (!this.#live && !(await this.#watch())) return load();
    const cached = this.#values.get(key);
    const now = this.#now();
    if (cached && now - cached.at <= (this.options.maxAgeMs ?? DEFAULT_MAX_AGE_MS)) {
      // Least recently used, to the second: moving an entry on every hit cost more than the read.
      if (now - cached.used > 1_000) {
        cached.used = now;
        this.#values.delete(key);
        this.#values.set(key, cached);
      }
      return cached.value;
    }
    let reading = this.#reading.get(key);
    if (!reading) {
      reading = { readers: 0, overtaken: false };
      this.#reading.set(key, reading);
    }
    reading.readers += 1;
    try {
      const at = this.#now();
      const value = await load();
      if (!reading.overtaken && !this.#closed) this.#touch(key, value, at);
      return value;
    } finally {
      reading.readers -= 1;
      if (reading.readers === 0) this.#reading.delete(key);
    }
  }

  /** Keeps what this gateway has just written (only while the watch is live). */
  remember(key: string, value: V): void {
    if (this.#live && !this.#closed) this.#touch(key, value, this.#now());
  }

  forget(key: string): void {
    this.#values.delete(key);
    const reading = this.#reading.get(key);
    if (reading) reading.overtaken = true;
  }

  close(): void {
    this.#closed = true;
    this.#live = false;
    this.#values.clear();
    void this.#watching?.then((unwatch) => unwatch?.());
  }

  #changed(change: KvChange<unknown>): void {
    const key = this.options.entryOf?.(change.key) ?? change.key;
    const cached = this.#values.get(key);
    if (cached !== undefined && this.options.includes?.(cached.value, change.revision)) return;
    this.forget(key);
  }

  #watch(): Promise<Unsubscribe | undefined> {
    this.#watching ??= this.bucket
      .watch((change) => this.#changed(change))
      .then(
        (unwatch) => {
          this.#live = true;
          return unwatch;
        },
        () => {
          // Tried again on the next read; until then every read goes to the broker.
          this.#watching = undefined;
          return undefined;
        },
      );
    return this.#watching;
  }

  #now(): number {
    return this.options.now?.() ?? Date.now();
  }

  #touch(key: string, value: V, at: number): void {
    this.#values.delete(key);
    this.#values.set(key, { value, at, used: at });
    if (this.#values.size > this.options.max) {
      const oldest = this.#values.keys().next().value as string;
      this.#values.delete(oldest);
    }
  }
}
