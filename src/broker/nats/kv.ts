import { type KV, type Kvm, KvWatchInclude } from "@nats-io/kv";
import { BrokerError } from "../errors.js";
import type { Warn } from "../policy.js";
import type { KvBucket, KvChange, KvEntry, Unsubscribe } from "../types.js";
import { checkKvKey, serializeKvValue } from "../validation.js";
import { bucketOptions, userBucket } from "./layout.js";
import { isRevisionConflict } from "./status-store.js";

/** `kv(name)` on NATS: the KV bucket `acp_kv_<name>`, created on first use. */
export class NatsBucket<T> implements KvBucket<T> {
  private opening: Promise<KV> | null = null;

  constructor(
    readonly name: string,
    private readonly kvm: Kvm,
    private readonly replicas: number,
    private readonly guard: <R>(work: () => Promise<R>) => Promise<R>,
    private readonly warn: Warn,
  ) {}

  async get(key: string): Promise<KvEntry<T> | null> {
    checkKvKey(key);
    return this.guard(async () => {
      const entry = await (await this.bucket()).get(key);
      if (entry?.operation !== "PUT") return null;
      return { key, value: entry.json<T>(), revision: entry.revision };
    });
  }

  async put(key: string, value: T): Promise<number> {
    checkKvKey(key);
    const text = serializeKvValue(value);
    return this.guard(async () => (await this.bucket()).put(key, text));
  }

  async create(key: string, value: T): Promise<number> {
    checkKvKey(key);
    const text = serializeKvValue(value);
    return this.guard(async () => {
      try {
        return await (await this.bucket()).create(key, text);
      } catch (error) {
        if (isRevisionConflict(error)) {
          throw new BrokerError("exists", `kv ${this.name}: key ${key} already exists`, { field: "key" });
        }
        throw error;
      }
    });
  }

  async update(key: string, value: T, expectedRevision: number): Promise<number> {
    checkKvKey(key);
    const text = serializeKvValue(value);
    return this.guard(async () => {
      const kv = await this.bucket();
      try {
        return await kv.update(key, text, expectedRevision);
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
        const current = await kv.get(key);
        const at = current && current.operation === "PUT" ? current.revision : "none";
        throw new BrokerError(
          "conflict",
          `kv ${this.name}: key ${key} is at revision ${at}, not ${expectedRevision}`,
          {
            field: "expectedRevision",
          },
        );
      }
    });
  }

  async delete(key: string): Promise<void> {
    checkKvKey(key);
    return this.guard(async () => {
      const kv = await this.bucket();
      const current = await kv.get(key);
      if (current && current.operation === "PUT") await kv.delete(key);
    });
  }

  async keys(prefix = ""): Promise<string[]> {
    return this.guard(async () => {
      // Subject filters match whole tokens only, so a prefix ending in "." is the one the server can apply.
      const filter = prefix.endsWith(".") ? `${prefix}>` : ">";
      const keys: string[] = [];
      for await (const key of await (await this.bucket()).keys(filter)) {
        if (key.startsWith(prefix)) keys.push(key);
      }
      return keys.sort();
    });
  }

  async watch(
    handler: (change: KvChange<T>) => void,
    options: { prefix?: string } = {},
  ): Promise<Unsubscribe> {
    const prefix = options.prefix ?? "";
    return this.guard(async () => {
      const watcher = await (await this.bucket()).watch({
        key: prefix.endsWith(".") ? `${prefix}>` : ">",
        include: KvWatchInclude.UpdatesOnly,
      });
      void (async () => {
        for await (const entry of watcher) {
          if (!entry.key.startsWith(prefix)) continue;
          const put = entry.operation === "PUT";
          try {
            handler({
              bucket: this.name,
              key: entry.key,
              op: put ? "put" : "delete",
              value: put ? entry.json<T>() : null,
              revision: entry.revision,
            });
          } catch (error) {
            this.warn(`kv ${this.name}: a watch handler threw: ${String(error)}`);
          }
        }
      })();
      return () => watcher.stop();
    });
  }

  private bucket(): Promise<KV> {
    if (!this.opening) {
      this.opening = this.kvm.create(
        userBucket(this.name),
        bucketOptions(userBucket(this.name), this.replicas),
      );
      this.opening.catch(() => {
        this.opening = null;
      });
    }
    return this.opening;
  }
}
