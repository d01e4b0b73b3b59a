import type { AuditRecord } from "../../audit/index.js";
import type { Broker } from "../../broker/index.js";
import { refKey } from "../../broker/validation.js";
import { AcpError, MessageType } from "../../protocol/index.js";
import { type FeedItem, feedItemOfAudit, type LiveFeed } from "./feed.js";
import type { FeedIndex } from "./feed-index.js";
import { FEED_TYPES, type FeedType, type IndexedEntry } from "./feed-index-schema.js";
import {
  countByBucket,
  type EntryQuery,
  entriesOfMessage,
  hasMessage,
  newestEntries,
  type Visibility,
} from "./feed-queries.js";
import type { Scope } from "./viewer.js";

/** Filters of the feed, the live stream and the volume chart. Times are epoch ms, bounds inclusive. */
export interface FeedQuery {
  /** Messages this agent sent or received. */
  agent?: string;
  /** Messages exchanged with this agent (with `agent`: between the two). */
  peer?: string;
  type?: MessageType;
  since?: number;
  until?: number;
  limit: number;
}

const DAY_MS = 24 * 3_600_000;
export const MAX_FEED_LIMIT = 500;

/** Reads and checks the query string; every wrong parameter is named in `problems`. */
export function parseFeedQuery(url: URL, now = Date.now()): FeedQuery {
  const problems: { path: string; message: string }[] = [];
  const param = (name: string) => {
    const value = url.searchParams.get(name);
    return value === null || value === "" ? undefined : value;
  };
  const time = (name: string): number | undefined => {
    const value = param(name);
    if (value === undefined) return undefined;
    const parsed = Date.parse(value);
    if (Number.isNaN(parsed)) problems.push({ path: name, message: "must be an ISO 8601 date-time" });
    return parsed;
  };
  const type = param("type");
  if (type !== undefined && !(MessageType.options as readonly string[]).includes(type)) {
    problems.push({ path: "type", message: `must be one of ${MessageType.options.join(", ")}` });
  }
  const limitText = param("limit");
  const limit = limitText === undefined ? 100 : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_FEED_LIMIT) {
    problems.push({ path: "limit", message: `must be a whole number from 1 to ${MAX_FEED_LIMIT}` });
  }
  const since = time("since") ?? now - DAY_MS;
  const until = time("until");
  if (until !== undefined && until < since)
    problems.push({ path: "until", message: "must not be before since" });
  if (problems.length > 0) throw new AcpError("InvalidParams", "invalid query parameters", { problems });
  const agent = param("agent");
  const peer = param("peer");
  return {
    ...(agent !== undefined ? { agent } : {}),
    ...(peer !== undefined ? { peer } : {}),
    ...(type !== undefined ? { type: type as MessageType } : {}),
    since,
    ...(until !== undefined ? { until } : {}),
    limit,
  };
}

/** The filters that apply to a single item (time bounds included when given). */
export function matchesQuery(
  item: Pick<FeedItem, "from" | "to" | "type" | "at">,
  query: Partial<FeedQuery>,
): boolean {
  const { agent, peer } = query;
  const from = item.from.agent;
  const to = item.to.agent;
  if (agent !== undefined && from !== agent && to !== agent) return false;
  if (peer !== undefined) {
    if (
      agent !== undefined
        ? !((from === agent && to === peer) || (from === peer && to === agent))
        : from !== peer && to !== peer
    )
      return false;
  }
  if (query.type !== undefined && item.type !== query.type) return false;
  const at = Date.parse(item.at);
  if (query.since !== undefined && at < query.since) return false;
  if (query.until !== undefined && at > query.until) return false;
  return true;
}

export interface VolumeBucket {
  /** Start of the bucket (ISO 8601). */
  start: string;
  total: number;
  byType: Record<MessageType, number>;
}

/** Round bucket sizes, so the chart's axis reads naturally; about `target` bars whatever the window. */
const NICE_BUCKETS_MS = [60_000, 5 * 60_000, 15 * 60_000, 3_600_000, 3 * 3_600_000, 6 * 3_600_000, DAY_MS];

export function bucketSizeFor(spanMs: number, target = 48): number {
  return (
    NICE_BUCKETS_MS.find((size) => spanMs / size <= target) ?? DAY_MS * Math.ceil(spanMs / DAY_MS / target)
  );
}

/**
 * The feed's past: this gateway's relay audit log (every message it relayed, with the summary it
 * wrote then), found through its index (feed-index.ts), merged with the live feed's recent items
 * (which also holds messages relayed by other gateways on the same NATS while this one was running).
 */
export class FeedHistory {
  constructor(
    private readonly broker: Broker,
    private readonly live: LiveFeed,
    /** The relay audit's index, or undefined when the gateway keeps no relay audit. */
    private readonly index: Promise<FeedIndex> | undefined,
  ) {}

  /** Newest first, at most `query.limit`, with their current delivery status. */
  async query(scope: Scope, query: FeedQuery): Promise<FeedItem[]> {
    const index = await this.caughtUp();
    const newest = index
      ? readItems(index, newestEntries(index, visibilityOf(scope), entryQuery(query), query.limit))
      : [];
    const keyOf = (item: FeedItem) => refKey({ from: item.from.agent, id: item.id });
    // Oldest first, as the live items below are.
    const byId = new Map(newest.reverse().map((item) => [keyOf(item), item]));
    // Live items go last, in the live feed's order (the order they were stored), replacing their
    // audit copies: messages stored in the same millisecond then read newest first, as live.
    for (const item of this.live.recent()) {
      if (scope.seesExchange(item.from.agent, item.to.agent) && matchesQuery(item, query)) {
        byId.delete(keyOf(item));
        byId.set(keyOf(item), { ...item });
      }
    }
    // Reversed, then a stable sort by time: equal times keep newest-added first.
    const page = [...byId.values()]
      .reverse()
      .sort((a, b) => b.at.localeCompare(a.at))
      .slice(0, query.limit);
    await Promise.all(
      page.map(async (item) => {
        if (item.status !== undefined) return;
        const record = await this.broker.status({ from: item.from.agent, id: item.id });
        if (record) Object.assign(item, { status: record.status, retryCount: record.retryCount });
      }),
    );
    return page;
  }

  /** Messages per time bucket over the query's window, split by type. */
  async volume(
    scope: Scope,
    query: FeedQuery,
    now = Date.now(),
  ): Promise<{ bucketMs: number; buckets: VolumeBucket[] }> {
    const since = query.since ?? now - DAY_MS;
    const until = query.until ?? now;
    const bucketMs = bucketSizeFor(until - since);
    const first = Math.floor(since / bucketMs) * bucketMs;
    const count = Math.floor((until - first) / bucketMs) + 1;
    const buckets: VolumeBucket[] = Array.from({ length: count }, (_, i) => ({
      start: new Date(first + i * bucketMs).toISOString(),
      total: 0,
      byType: { request: 0, response: 0, notification: 0, handoff: 0 },
    }));
    const window = { ...query, since, until };
    const index = await this.caughtUp();
    if (index) {
      const counts = countByBucket(index, visibilityOf(scope), entryQuery(window), first, bucketMs, count);
      counts.forEach((byType, i) => {
        const bucket = buckets[i] as VolumeBucket;
        byType.forEach((n, type) => {
          bucket.byType[FEED_TYPES[type] as FeedType] += n;
          bucket.total += n;
        });
      });
    }
    // Messages other gateways on the same NATS relayed: in the live feed, not in this one's audit.
    for (const item of this.live.recentFromElsewhere()) {
      if (!scope.seesExchange(item.from.agent, item.to.agent) || !matchesQuery(item, window)) continue;
      if (index && hasMessage(index, item.from.agent, item.id)) continue;
      const bucket = buckets[Math.floor((Date.parse(item.at) - first) / bucketMs)];
      if (!bucket) continue;
      bucket.total++;
      bucket.byType[item.type]++;
    }
    return { bucketMs, buckets };
  }

  /** The relay audit entries of one message (normally one: the gateway records each message once). */
  async auditEntries(from: string, id: string): Promise<AuditRecord[]> {
    const index = await this.caughtUp();
    if (!index) return [];
    return index.read(entriesOfMessage(index, from, id)).filter((record) => record !== undefined);
  }

  /** The index, with what the relay wrote since its last look read in first. */
  private async caughtUp(): Promise<FeedIndex | undefined> {
    let index: FeedIndex | undefined;
    try {
      index = await this.index;
      index?.catchUpChanged();
    } catch (err) {
      throw unreadable(err);
    }
    return index;
  }
}

/** What a viewer may see, as the index's queries take it. */
function visibilityOf(scope: Scope): Visibility {
  if (scope.viewer.kind === "admin") return {};
  return {
    principal: scope.viewer.principalId,
    agents: new Set(scope.agents().map((agent) => agent.agentId)),
  };
}

function entryQuery(query: Partial<FeedQuery>): EntryQuery {
  return {
    ...(query.agent !== undefined ? { agent: query.agent } : {}),
    ...(query.peer !== undefined ? { peer: query.peer } : {}),
    ...(query.type !== undefined ? { type: query.type } : {}),
    since: query.since ?? 0,
    until: query.until ?? Number.MAX_SAFE_INTEGER,
  };
}

/** Feed items of indexed entries (an entry no longer readable is left out). */
function readItems(index: FeedIndex, rows: IndexedEntry[]): FeedItem[] {
  return index.read(rows).flatMap((record) => {
    const item = record && feedItemOfAudit(record.entry);
    return item ? [item] : [];
  });
}

function unreadable(err: unknown): unknown {
  if (err instanceof AcpError) return err;
  return new AcpError(
    "StorageUnavailable",
    `the relay audit index cannot be read: ${(err as Error).message}`,
  );
}
