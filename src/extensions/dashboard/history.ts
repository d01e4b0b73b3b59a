import { type AuditEntry, AuditLogError, type AuditRecord, readAudit } from "../../audit/index.js";
import type { Broker, MessageKind } from "../../broker/index.js";
import { MESSAGE_KINDS } from "../../broker/types.js";
import { refKey } from "../../broker/validation.js";
import { AcpError } from "../../protocol/index.js";
import { type FeedItem, feedItemOfAudit, type LiveFeed } from "./feed.js";
import type { Scope } from "./viewer.js";

/** Filters of the feed, the live stream and the volume chart. Times are epoch ms, bounds inclusive. */
export interface FeedQuery {
  /** Messages this agent sent or received. */
  agent?: string;
  /** Messages exchanged with this agent (with `agent`: between the two). */
  peer?: string;
  type?: MessageKind;
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
  if (type !== undefined && !(MESSAGE_KINDS as readonly string[]).includes(type)) {
    problems.push({ path: "type", message: `must be one of ${MESSAGE_KINDS.join(", ")}` });
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
    ...(type !== undefined ? { type: type as MessageKind } : {}),
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
  byType: Record<MessageKind, number>;
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
 * wrote then) merged with the live feed's recent items (which also holds messages relayed by other
 * gateways on the same NATS while this one was running).
 */
export class FeedHistory {
  constructor(
    private readonly broker: Broker,
    private readonly live: LiveFeed,
    /** `<data>/relay-audit`, or undefined when the gateway keeps no relay audit. */
    private readonly auditRoot: string | undefined,
  ) {}

  /** Newest first, at most `query.limit`, with their current delivery status. */
  async query(scope: Scope, query: FeedQuery): Promise<FeedItem[]> {
    const newest: FeedItem[] = [];
    await this.scan(scope, query, (item) => {
      newest.push(item);
      // Only the last `limit` matches can make the page: keep the buffer bounded while scanning.
      if (newest.length >= query.limit * 2) newest.splice(0, newest.length - query.limit);
    });
    const keyOf = (item: FeedItem) => refKey({ from: item.from.agent, id: item.id });
    const byId = new Map(newest.map((item) => [keyOf(item), item]));
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
    const seen = new Set<string>();
    const add = (item: FeedItem) => {
      if (seen.has(item.id)) return;
      seen.add(item.id);
      const bucket = buckets[Math.floor((Date.parse(item.at) - first) / bucketMs)];
      if (!bucket) return;
      bucket.total++;
      bucket.byType[item.type]++;
    };
    const window = { ...query, since, until };
    await this.scan(scope, window, add);
    for (const item of this.live.recent()) {
      if (scope.seesExchange(item.from.agent, item.to.agent) && matchesQuery(item, window)) add(item);
    }
    return { bucketMs, buckets };
  }

  /** The relay audit entries of one message (normally one: the gateway records each message once). */
  async auditEntries(from: string, id: string): Promise<AuditRecord[]> {
    if (this.auditRoot === undefined) return [];
    const found: AuditRecord[] = [];
    try {
      for await (const record of readAudit({ root: this.auditRoot, agent: from })) {
        if (record.entry.messageId === id || (record.entry.messageId === undefined && record.entry.id === id))
          found.push(record);
      }
    } catch (err) {
      if (err instanceof AuditLogError && /no audit log/.test(err.message)) return [];
      throw unreadable(err);
    }
    return found;
  }

  /** Every visible, matching relay audit entry in the window, oldest first. */
  private async scan(
    scope: Scope,
    query: Partial<FeedQuery>,
    onItem: (item: FeedItem) => void,
  ): Promise<void> {
    if (this.auditRoot === undefined) return;
    try {
      for await (const { entry } of readAudit({
        root: this.auditRoot,
        ...(query.since !== undefined ? { since: new Date(query.since) } : {}),
        ...(query.until !== undefined ? { until: new Date(query.until) } : {}),
        ...(query.type !== undefined ? { type: query.type } : {}),
      })) {
        if (!scope.seesExchange(entry.from.agent, entry.to.agent)) continue;
        const item = feedItemOfAudit(entry as AuditEntry);
        if (item && matchesQuery(item, query)) onItem(item);
      }
    } catch (err) {
      throw unreadable(err);
    }
  }
}

function unreadable(err: unknown): unknown {
  if (!(err instanceof AuditLogError)) return err;
  return new AcpError("StorageUnavailable", `the relay audit log cannot be read: ${err.message}`);
}
