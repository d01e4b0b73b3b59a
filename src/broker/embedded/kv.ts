import { BrokerError } from "../errors.js";
import { Listeners } from "../listeners.js";
import type { Warn } from "../policy.js";
import type { KvBucket, KvChange, KvEntry, Unsubscribe } from "../types.js";
import { checkBucketName, checkKvKey, serializeKvValue } from "../validation.js";
import type { CommitQueue } from "./commit-queue.js";
import type { SqliteDatabase, SqliteStatement } from "./sqlite.js";

interface KvRow {
  value: string | null;
  revision: number;
}

/**
 * The `kv` table shared by all buckets. A delete leaves a tombstone (value NULL) so revisions only
 * ever grow, even across restarts, and a stale revision can never match again.
 */
export class KvStore {
  private readonly getStmt: SqliteStatement<[string, string], KvRow>;
  private readonly writeStmt: SqliteStatement;
  private readonly keysStmt: SqliteStatement<[string, string, string], { key: string }>;
  private readonly watchers = new Map<string, Listeners<KvChange<unknown>>>();
  private revision: number;

  constructor(
    db: SqliteDatabase,
    readonly commits: CommitQueue,
    private readonly warn: Warn,
    private readonly onChange: (change: KvChange<unknown>) => void,
  ) {
    this.getStmt = db.prepare("SELECT value, revision FROM kv WHERE bucket = ? AND key = ?");
    this.writeStmt = db.prepare(
      `INSERT INTO kv (bucket, key, value, revision) VALUES (?, ?, ?, ?)
       ON CONFLICT(bucket, key) DO UPDATE SET value = excluded.value, revision = excluded.revision`,
    );
    // Keys are ASCII below 0x7f, so [prefix, prefix + DEL) is exactly the keys starting with prefix.
    this.keysStmt = db.prepare(
      "SELECT key FROM kv WHERE bucket = ? AND key >= ? AND key < ? AND value IS NOT NULL ORDER BY key",
    );
    const row = db.prepare("SELECT max(revision) AS top FROM kv").get() as { top: number | null };
    this.revision = row.top ?? 0;
  }

  bucket<T>(name: string): KvBucket<T> {
    checkBucketName(name);
    return new EmbeddedBucket<T>(name, this);
  }

  read(bucket: string, key: string): KvRow | undefined {
    return this.getStmt.get(bucket, key);
  }

  /** Runs inside a commit batch. `value` null writes a tombstone. */
  write(bucket: string, key: string, value: string | null): number {
    this.revision += 1;
    this.writeStmt.run(bucket, key, value, this.revision);
    return this.revision;
  }

  keys(bucket: string, prefix: string): string[] {
    return this.keysStmt.all(bucket, prefix, `${prefix}\x7f`).map((row) => row.key);
  }

  watch(bucket: string, handler: (change: KvChange<unknown>) => void): Unsubscribe {
    let listeners = this.watchers.get(bucket);
    if (!listeners) {
      listeners = new Listeners(this.warn);
      this.watchers.set(bucket, listeners);
    }
    return listeners.add(handler);
  }

  changed(change: KvChange<unknown>): void {
    this.watchers.get(change.bucket)?.emit(change);
    this.onChange(change);
  }
}

class EmbeddedBucket<T> implements KvBucket<T> {
  constructor(
    readonly name: string,
    private readonly store: KvStore,
  ) {}

  async get(key: string): Promise<KvEntry<T> | null> {
    checkKvKey(key);
    const row = this.store.read(this.name, key);
    if (!row || row.value === null) return null;
    return { key, value: JSON.parse(row.value) as T, revision: row.revision };
  }

  async put(key: string, value: T): Promise<number> {
    return this.write(key, value, () => undefined);
  }

  async create(key: string, value: T): Promise<number> {
    return this.write(key, value, (current) => {
      if (current && current.value !== null) {
        throw new BrokerError("exists", `kv ${this.name}: key ${key} already exists`, { field: "key" });
      }
    });
  }

  async update(key: string, value: T, expectedRevision: number): Promise<number> {
    return this.write(key, value, (current) => {
      if (!current || current.value === null || current.revision !== expectedRevision) {
        throw new BrokerError(
          "conflict",
          `kv ${this.name}: key ${key} is at revision ${current?.revision ?? "none"}, not ${expectedRevision}`,
          { field: "expectedRevision" },
        );
      }
    });
  }

  async delete(key: string): Promise<void> {
    checkKvKey(key);
    await this.store.commits.run(
      () => {
        const current = this.store.read(this.name, key);
        if (!current || current.value === null) return null;
        return this.store.write(this.name, key, null);
      },
      (revision) => {
        if (revision !== null)
          this.store.changed({ bucket: this.name, key, op: "delete", value: null, revision });
      },
    );
  }

  async keys(prefix = ""): Promise<string[]> {
    return this.store.keys(this.name, prefix);
  }

  async watch(
    handler: (change: KvChange<T>) => void,
    options: { prefix?: string } = {},
  ): Promise<Unsubscribe> {
    const prefix = options.prefix ?? "";
    return this.store.watch(this.name, (change) => {
      if (change.key.startsWith(prefix)) handler(change as KvChange<T>);
    });
  }

  private write(key: string, value: T, precondition: (current: KvRow | undefined) => void): Promise<number> {
    checkKvKey(key);
    const text = serializeKvValue(value);
    return this.store.commits.run(
      () => {
        precondition(this.store.read(this.name, key));
        return this.store.write(this.name, key, text);
      },
      (revision) =>
        this.store.changed({
          bucket: this.name,
          key,
          op: "put",
          value: JSON.parse(text) as unknown,
          revision,
        }),
    );
  }
}
