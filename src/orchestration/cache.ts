import { createHash } from "node:crypto";
import { canonicalize } from "../protocol/index.js";
import type { AgentCommand, AgentResponse } from "./schemas.js";

export interface CachedResponse {
  key: string;
  response: AgentResponse;
  /** ms since the epoch. */
  expiresAt: number;
}

/**
 * Successful responses of cacheable commands, for `cache_ttl` seconds. The key is what determines
 * the answer: target, action, parameters and the permissions asked for; never the id, timestamp or
 * priority. Bounded: the least recently used entry goes first.
 */
export class ResponseCache {
  private readonly entries = new Map<string, { response: AgentResponse; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 1000,
  ) {}

  /** Undefined when the parameters are not plain JSON (then the command is simply not cached). */
  static keyOf(command: AgentCommand): string | undefined {
    try {
      const material = canonicalize({
        to: command.to,
        action: command.action,
        parameters: command.parameters,
        permissions: command.security?.permissions ?? [],
      });
      return createHash("sha256").update(material).digest("base64url");
    } catch {
      return undefined;
    }
  }

  /**
   * The cached successful response to an equal command (same target, action, parameters and permissions), if
   * it has not expired.
   */
  get(command: AgentCommand): AgentResponse | undefined {
    const key = ResponseCache.keyOf(command);
    if (key === undefined) return undefined;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (Date.now() >= entry.expiresAt) {
      this.entries.delete(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.response;
  }

  /**
   * Keeps a response for `ttlMs`, dropping the least recently used entry past `maxEntries`; a TTL of 0 caches
   * nothing.
   */
  set(command: AgentCommand, response: AgentResponse): void {
    if (this.ttlMs <= 0) return;
    const key = ResponseCache.keyOf(command);
    if (key === undefined) return;
    this.entries.delete(key);
    this.entries.set(key, { response, expiresAt: Date.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  /** The live entries, for keeping them across processes (see `restore`). */
  snapshot(): CachedResponse[] {
    const now = Date.now();
    return [...this.entries].filter(([, e]) => e.expiresAt > now).map(([key, e]) => ({ key, ...e }));
  }

  /** Puts back entries from `snapshot()` (expired ones are dropped). */
  restore(entries: readonly CachedResponse[]): void {
    const now = Date.now();
    for (const { key, response, expiresAt } of entries) {
      if (expiresAt > now) this.entries.set(key, { response, expiresAt });
    }
  }

  /** How many entries are held, expired ones not yet dropped included. */
  get size(): number {
    return this.entries.size;
  }

  /** Drops every entry, e.g. when the agents' behaviour changed and old answers no longer hold. */
  clear(): void {
    this.entries.clear();
  }
}
