import type { SqliteStatement } from "../../broker/embedded/sqlite.js";
import type { FeedIndex } from "./feed-index.js";
import {
  FEED_TYPES,
  type FeedType,
  GATEWAY_SCOPE,
  GATEWAY_SLOT_MS,
  type IndexedEntry,
  PARTY_SLOT_MS,
  type WalkIndexes,
} from "./feed-index-schema.js";

/**
 * The feed's and the volume chart's questions to the FeedIndex. Each answer walks an index from
 * the newest end and stops once it has enough ("walks"): by type and time for everything, by
 * sender and by recipient for one agent's exchanges or one principal's agents, so a page costs
 * the same whatever the history holds. Volume adds the rollups of whole slots to exact counts of
 * the window's two partial ends.
 */

/** Who may be seen: everything (the admin), or exchanges one of these agents took part in. */
export interface Visibility {
  /** The viewer's principal (its rollups count exactly what its agents see). */
  principal?: string;
  /** Undefined: every agent. */
  agents?: ReadonlySet<string>;
}

/** The filters of the feed and the volume chart; times are epoch ms, both bounds inclusive. */
export interface EntryQuery {
  agent?: string;
  peer?: string;
  type?: FeedType;
  since: number;
  until: number;
}

/** One index walk: the indexed column and its value, plus filters on the rows it meets. */
interface Walk {
  index: "type" | "sender" | "recipient";
  key: number;
  /** The other side (recipient for a sender walk, sender for a recipient walk) must be one of these. */
  others?: number[];
  /** A recipient walk's sender must not be one of these (the sender walks count those entries). */
  notFrom?: number[];
  type?: number;
}

/** Past this many agents a principal's feed walks by time and filters, instead of walking each agent. */
const MAX_AGENT_WALKS = 32;

/**
 * The walks that together find every visible entry matching `query`; [] when nothing can match.
 * They may meet (an exchange between two of a principal's agents is on a sender walk and on a
 * recipient walk), each stopping at a page; `disjoint` walks never meet (the recipient walks leave
 * out senders the sender walks count), for counting, which walks the whole window anyway.
 */
function walksFor(
  index: FeedIndex,
  visibility: Visibility,
  query: EntryQuery,
  disjoint: boolean,
): Walk[] | "scan" {
  const type = query.type === undefined ? undefined : FEED_TYPES.indexOf(query.type);
  const idOf = (agent: string) => index.nameId(`a:${agent}`);
  const sees = (agent: string | undefined) =>
    agent !== undefined && (!visibility.agents || visibility.agents.has(agent));
  const mine = () => [...(visibility.agents ?? [])].map(idOf).filter((id): id is number => id !== undefined);
  const agent = query.agent ?? query.peer;
  const peer = query.agent === undefined ? undefined : query.peer;
  if (agent !== undefined) {
    const a = idOf(agent);
    if (a === undefined) return [];
    if (peer !== undefined) {
      const p = idOf(peer);
      if (p === undefined || !(sees(agent) || sees(peer))) return [];
      const fromAgent: Walk = { index: "sender", key: a, others: [p], type };
      return p === a ? [fromAgent] : [fromAgent, { index: "sender", key: p, others: [a], type }];
    }
    // An agent the viewer does not own: its exchanges with the viewer's agents (which never
    // include one with itself, so the two walks cannot meet).
    const others = sees(agent) ? undefined : mine();
    if (others?.length === 0) return [];
    return [
      { index: "sender", key: a, ...(others ? { others } : {}), type },
      {
        index: "recipient",
        key: a,
        ...(others ? { others } : disjoint ? { notFrom: [a] } : {}),
        type,
      },
    ];
  }
  if (!visibility.agents) {
    const types = type === undefined ? FEED_TYPES.map((_, code) => code) : [type];
    return types.map((code) => ({ index: "type", key: code }));
  }
  const agents = mine();
  if (agents.length > MAX_AGENT_WALKS) return "scan";
  return [
    ...agents.map((id): Walk => ({ index: "sender", key: id, type })),
    ...agents.map(
      (id): Walk => ({ index: "recipient", key: id, ...(disjoint ? { notFrom: agents } : {}), type }),
    ),
  ];
}

/** What reading an entry needs. */
const COLUMNS = "rowid, message_id AS id, at, type, log, offset, length, line";
/**
 * What counting an entry needs: its time and type (the walks are disjoint: no rowid to tell entries
 * apart), which the walks' indexes hold, so no row is read (but by the time walks of a principal
 * with many agents, which read each row for its parties).
 */
const COUNT_COLUMNS = "at, type";

/** One row: how many entries of each type (`t0`… by type code). */
const COUNT_BY_TYPE = FEED_TYPES.map((_, code) => `COUNT(*) FILTER (WHERE type = ${code}) AS t${code}`).join(
  ", ",
);

function walkSql(
  indexes: WalkIndexes,
  walk: Walk,
  params: unknown[],
  query: EntryQuery,
  columns: string,
  limit: number | undefined,
): string {
  const where = [`${walk.index} = ?`, "at >= ?", "at <= ?"];
  params.push(walk.key, query.since, query.until);
  if (walk.others) {
    where.push(
      `${walk.index === "sender" ? "recipient" : "sender"} IN (${walk.others.map(() => "?").join(", ")})`,
    );
    params.push(...walk.others);
  }
  if (walk.notFrom) {
    where.push(`sender NOT IN (${walk.notFrom.map(() => "?").join(", ")})`);
    params.push(...walk.notFrom);
  }
  if (walk.type !== undefined && walk.index !== "type") {
    where.push("type = ?");
    params.push(walk.type);
  }
  const order = limit === undefined ? "" : " ORDER BY at DESC, rowid DESC LIMIT ?";
  if (limit !== undefined) params.push(limit);
  return `SELECT * FROM (SELECT ${columns} FROM entries INDEXED BY ${indexes[walk.index]} WHERE ${where.join(" AND ")}${order})`;
}

const statements = new WeakMap<FeedIndex, Map<string, SqliteStatement<unknown[], unknown>>>();

function run<Row>(index: FeedIndex, sql: string, params: unknown[]): Row[] {
  let cache = statements.get(index);
  if (!cache) {
    cache = new Map();
    statements.set(index, cache);
  }
  let statement = cache.get(sql);
  if (!statement) {
    statement = index.db.prepare<unknown[], unknown>(sql);
    // Statements differ only by the number of walks and agents; keep the cache small anyway.
    if (cache.size > 256) cache.clear();
    cache.set(sql, statement);
  }
  return statement.all(...params) as Row[];
}

/** Entries of a principal with many agents: the time walk, filtered by its agents (ids bound as a list). */
function scanSql(
  index: FeedIndex,
  visibility: Visibility,
  query: EntryQuery,
  params: unknown[],
  columns: string,
  limit: number | undefined,
): string {
  const ids = [...(visibility.agents ?? [])]
    .map((agent) => index.nameId(`a:${agent}`))
    .filter((id): id is number => id !== undefined);
  const list = ids.map(() => "?").join(", ");
  const types =
    query.type === undefined ? FEED_TYPES.map((_, code) => code) : [FEED_TYPES.indexOf(query.type)];
  return types
    .map((type) => {
      params.push(type, query.since, query.until, ...ids, ...ids);
      const order = limit === undefined ? "" : " ORDER BY at DESC, rowid DESC LIMIT ?";
      if (limit !== undefined) params.push(limit);
      return `SELECT * FROM (SELECT ${columns} FROM entries INDEXED BY ${index.walkIndexes.type} WHERE type = ? AND at >= ? AND at <= ? AND (sender IN (${list}) OR recipient IN (${list}))${order})`;
    })
    .join(" UNION ALL ");
}

/**
 * The visible entries matching `query` as one SELECT of `columns`, each entry at most once, the
 * newest `limit` of each walk when limited (a page: the UNION of the walks drops an entry two of
 * them meet); without a limit (counting every entry) the walks are disjoint and simply added up
 * (walks by type never meet either: an entry has one type). Undefined when nothing can match.
 */
function visibleSql(
  index: FeedIndex,
  visibility: Visibility,
  query: EntryQuery,
  params: unknown[],
  columns: string,
  limit?: number,
): string | undefined {
  if (query.since > query.until) return undefined;
  const disjoint = limit === undefined;
  const walks = walksFor(index, visibility, query, disjoint);
  if (walks.length === 0) return undefined;
  if (walks === "scan") return scanSql(index, visibility, query, params, columns, limit);
  const union = disjoint || walks.every((walk) => walk.index === "type") ? " UNION ALL " : " UNION ";
  return walks.map((walk) => walkSql(index.walkIndexes, walk, params, query, columns, limit)).join(union);
}

/** The newest `limit` visible entries matching `query`, newest first (ties: the later indexed first). */
export function newestEntries(
  index: FeedIndex,
  visibility: Visibility,
  query: EntryQuery,
  limit: number,
): IndexedEntry[] {
  const params: unknown[] = [];
  const union = visibleSql(index, visibility, query, params, COLUMNS, limit);
  if (union === undefined) return [];
  params.push(limit);
  return run(index, `${union} ORDER BY at DESC, rowid DESC LIMIT ?`, params);
}

/** Counts per bucket: `counts[bucket][type]`. */
export type BucketCounts = number[][];

/**
 * Visible entries matching `query` per bucket of `bucketMs` starting at `first`, by type. Whole
 * rollup slots come from the rollups when the question is one they answer (everything, one
 * principal's agents, one agent) and the buckets are whole slots; the rest is counted by SQLite
 * over the same walks as the feed's, without reading the entries.
 */
export function countByBucket(
  index: FeedIndex,
  visibility: Visibility,
  query: EntryQuery,
  first: number,
  bucketMs: number,
  buckets: number,
): BucketCounts {
  const counts: BucketCounts = Array.from({ length: buckets }, () => FEED_TYPES.map(() => 0));
  const add = (bucket: number, type: number, n: number) => {
    const row = counts[bucket];
    if (row) row[type] = (row[type] ?? 0) + n;
  };
  // Only entries inside the buckets count.
  const within = {
    ...query,
    since: Math.max(query.since, first),
    until: Math.min(query.until, first + buckets * bucketMs - 1),
  };
  // A bucket at a time, each type's count in one row: grouping by bucket and type made SQLite sort
  // every entry counted (most of the cost of a partial end of tens of thousands).
  const countEntries = (part: EntryQuery) => {
    const lastBucket = Math.floor((part.until - first) / bucketMs);
    for (let bucket = Math.floor((part.since - first) / bucketMs); bucket <= lastBucket; bucket++) {
      const start = first + bucket * bucketMs;
      const params: unknown[] = [];
      const piece = {
        ...part,
        since: Math.max(part.since, start),
        until: Math.min(part.until, start + bucketMs - 1),
      };
      const union = visibleSql(index, visibility, piece, params, COUNT_COLUMNS);
      if (union === undefined) continue;
      const [row] = run<Record<string, number>>(index, `SELECT ${COUNT_BY_TYPE} FROM (${union})`, params);
      for (const type of FEED_TYPES.keys()) add(bucket, type, row?.[`t${type}`] ?? 0);
    }
  };
  const rollup = rollupFor(index, visibility, within);
  const slotMs = rollup?.slotMs ?? bucketMs;
  const firstSlot = Math.ceil(within.since / slotMs);
  const endSlot = Math.floor((within.until + 1) / slotMs);
  if (!rollup || bucketMs % slotMs !== 0 || endSlot <= firstSlot) {
    countEntries(within);
    return counts;
  }
  const rows = run<{ slot: number; type: number; count: number }>(
    index,
    "SELECT slot, type, count FROM volume WHERE scope = ? AND slot >= ? AND slot < ?",
    [rollup.scope, firstSlot, endSlot],
  );
  for (const row of rows)
    if (within.type === undefined || FEED_TYPES[row.type] === within.type)
      add(Math.floor((row.slot * slotMs - first) / bucketMs), row.type, row.count);
  // The window's partial slots at either end.
  countEntries({ ...within, until: firstSlot * slotMs - 1 });
  countEntries({ ...within, since: endSlot * slotMs });
  return counts;
}

/** The rollup that counts exactly the visible entries `query` asks for, if there is one. */
function rollupFor(
  index: FeedIndex,
  visibility: Visibility,
  query: EntryQuery,
): { scope: number; slotMs: number } | undefined {
  if (query.peer !== undefined) return undefined;
  if (query.agent !== undefined) {
    if (visibility.agents && !visibility.agents.has(query.agent)) return undefined;
    const scope = index.nameId(`a:${query.agent}`);
    return scope === undefined ? undefined : { scope, slotMs: PARTY_SLOT_MS };
  }
  if (!visibility.agents) return { scope: GATEWAY_SCOPE, slotMs: GATEWAY_SLOT_MS };
  if (visibility.principal === undefined) return undefined;
  const scope = index.nameId(`p:${visibility.principal}`);
  return scope === undefined ? undefined : { scope, slotMs: PARTY_SLOT_MS };
}

/** The relay audit entries of one message from `sender`. */
export function entriesOfMessage(index: FeedIndex, sender: string, id: string): IndexedEntry[] {
  const senderId = index.nameId(`a:${sender}`);
  if (senderId === undefined) return [];
  return run(index, `SELECT ${COLUMNS} FROM entries WHERE message_id = ? AND sender = ? ORDER BY rowid`, [
    id,
    senderId,
  ]);
}

/** Whether the index holds an entry for this message of `sender`. */
export function hasMessage(index: FeedIndex, sender: string, id: string): boolean {
  const senderId = index.nameId(`a:${sender}`);
  if (senderId === undefined) return false;
  return (
    run(index, `SELECT ${COLUMNS} FROM entries WHERE message_id = ? AND sender = ? LIMIT 1`, [id, senderId])
      .length > 0
  );
}
