import type { KnowledgeEntry, SearchHit } from "../../collab/contracts.js";
import { createRequire } from "node:module";
import type Database from "better-sqlite3";
import type { Broker, KvBucket, Unsubscribe } from "../../broker/index.js";
import { bucketOf, listValues } from "./store.js";

export const ENTRY_KEY = (entryId: string) => `e.${entryId}`;

/**
 * Full-text search over knowledge entries: an SQLite FTS5 index (porter stemming, BM25 ranking with
 * titles and tags weighted above content). The entries themselves live in the broker's KV; the
 * index is rebuilt from it at start and kept current by a KV watch, so on NATS every gateway indexes
 * what any gateway published, and on the embedded store it follows the same path.
 */
export class KnowledgeIndex {
  // Loaded when a gateway mounts collaboration, not when acp-kit/server is imported.
  private readonly db = new (createRequire(import.meta.url)("better-sqlite3") as typeof Database)(":memory:");
  private readonly bucket: KvBucket<KnowledgeEntry>;
  private readonly entries = new Map<string, KnowledgeEntry>();
  private unwatch: Unsubscribe | undefined;

  constructor(broker: Broker) {
    this.bucket = bucketOf<KnowledgeEntry>(broker, "knowledge");
    this.db.exec(
      "CREATE VIRTUAL TABLE entries USING fts5(entry_id UNINDEXED, team_id UNINDEXED, title, content, tags, tokenize = 'porter unicode61')",
    );
  }

  async start(): Promise<void> {
    // Watch first, then load: nothing written in between is missed (upserts are idempotent).
    this.unwatch = await this.bucket.watch(
      (change) => {
        if (change.op === "put" && change.value) this.upsert(change.value);
        else this.remove(change.key.slice(2));
      },
      { prefix: "e." },
    );
    for (const entry of await listValues(this.bucket, "e.")) this.upsert(entry);
  }

  stop(): void {
    this.unwatch?.();
    this.db.close();
  }

  get size(): number {
    return this.entries.size;
  }

  upsert(entry: KnowledgeEntry): void {
    if (!this.db.open) return;
    const known = this.entries.get(entry.entryId);
    this.entries.set(entry.entryId, entry);
    if (known && known.title === entry.title && known.content === entry.content && sameTags(known, entry))
      return;
    this.db.prepare("DELETE FROM entries WHERE entry_id = ?").run(entry.entryId);
    this.db
      .prepare("INSERT INTO entries (entry_id, team_id, title, content, tags) VALUES (?, ?, ?, ?, ?)")
      .run(entry.entryId, entry.teamId, entry.title, entry.content, entry.tags.join(" "));
  }

  remove(entryId: string): void {
    if (!this.db.open) return;
    this.entries.delete(entryId);
    this.db.prepare("DELETE FROM entries WHERE entry_id = ?").run(entryId);
  }

  /**
   * Entries of one team matching every word of `query` (prefixes match: `deploy` finds
   * `deployment`), best first; with `tag`, only entries carrying it. An empty query lists the
   * newest entries.
   */
  search(teamId: string, query: string, options: { tag?: string; limit?: number } = {}): SearchHit[] {
    const limit = Math.min(100, Math.max(1, options.limit ?? 20));
    const words = query.match(/[\p{L}\p{N}_]+/gu) ?? [];
    let rows: { entry_id: string; score: number; snippet: string }[];
    if (words.length === 0) {
      rows = [...this.entries.values()]
        .filter((e) => e.teamId === teamId)
        .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
        .map((e) => ({ entry_id: e.entryId, score: 0, snippet: e.content.slice(0, 120) }));
    } else {
      const match = words.map((w) => `"${w.replace(/"/g, '""')}"*`).join(" AND ");
      rows = this.db
        .prepare(
          `SELECT entry_id, bm25(entries, 0, 0, 8, 1, 4) AS score,
                  snippet(entries, 3, '[', ']', '…', 16) AS snippet
             FROM entries WHERE entries MATCH ? AND team_id = ? ORDER BY score LIMIT 500`,
        )
        .all(match, teamId) as { entry_id: string; score: number; snippet: string }[];
    }
    const hits: SearchHit[] = [];
    for (const row of rows) {
      const entry = this.entries.get(row.entry_id);
      if (!entry || (options.tag !== undefined && !entry.tags.includes(options.tag))) continue;
      hits.push({
        entryId: entry.entryId,
        title: entry.title,
        tags: entry.tags,
        author: entry.author,
        uses: entry.uses,
        createdAt: entry.createdAt,
        snippet: row.snippet,
        score: row.score,
      });
      if (hits.length >= limit) break;
    }
    return hits;
  }
}

function sameTags(a: KnowledgeEntry, b: KnowledgeEntry): boolean {
  return a.tags.join("\u0000") === b.tags.join("\u0000");
}
