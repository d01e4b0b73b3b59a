/**
 * Everything the NATS broker creates on the server, by name. docs/brokers.md describes this layout;
 * change both together.
 */
import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { type BrokerPolicy, backoffSchedule } from "../policy.js";

/** Every message, one subject per recipient: `agent.<recipient-id>.inbox` (the ACP core protocol). */
export const INBOX_STREAM = "ACP_INBOX";
/**
 * Each message has two small index entries, one on its sender's subject and one on its
 * recipient's, `acp.index.<shard>.<agent>.sent|received`, in the index stream of that agent's shard
 * (`ACP_INDEX_00` to `ACP_INDEX_15`), so `list` walks a participant's own subjects in a stream
 * holding a sixteenth of the entries (listing.ts says why).
 */
export const INDEX_SHARDS = 16;
/**
 * The index stream of brokers made before the shards: one entry per message on
 * `acp.index.<from>.<to>`. Kept (not created) while it exists: `list` walks it until retention has
 * emptied it (legacy-index.ts).
 */
export const LEGACY_INDEX_STREAM = "ACP_INDEX";
/** Status record per message id (KV), kept after the envelope expires. */
export const STATUS_BUCKET = "acp_message_status";
/** Quota usage per agent (KV, no change feed): `usage-ledger.ts`. */
export const USAGE_BUCKET = "acp_usage";
/** `kv(name)` maps to this bucket, so user buckets never collide with the broker's own. */
export const USER_BUCKET_PREFIX = "acp_kv_";
/**
 * Every KV bucket of the broker republishes its *stored* writes to `acp.changes.<bucket>.<key>`:
 * the change feed. (A plain subscription on `$KV.>` would also see compare-and-set writes the
 * stream refused.)
 */
export const CHANGES_PREFIX = "acp.changes";

/**
 * The consumer's own `max_deliver`. JetStream needs a finite one next to a backoff list, but the
 * broker counts attempts itself (a hand-out given back by a close is not always one) and
 * dead-letters at `policy.maxDeliver`, so the server's count only has to stay out of the way.
 */
export const JETSTREAM_MAX_DELIVER = 1_000_000;

/** JetStream's dedup window: at least ten minutes, never longer than retention (the server refuses that). */
const DUPLICATE_WINDOW_MS = 10 * 60 * 1000;

export const Header = {
  /** The sender, on messages stored before `Nats-Msg-Id` was `<from>/<id>` (none is written now). */
  From: "Acp-From",
  Kind: "Acp-Kind",
  Method: "Acp-Method",
  SubmittedAt: "Acp-Submitted-At",
  QueuedAt: "Acp-Queued-At",
  /** The message's rank in its recipient's queue (priorityRank); absent: medium. */
  Priority: "Acp-Priority",
  /** `SubmitInput.route`, so an inbox that sees the message before its status record knows it. */
  Route: "Acp-Route",
  /** `SubmitInput.replyTo`, for the same reason: the record such an inbox writes routes the answer. */
  ReplyTo: "Acp-Reply-To",
} as const;

export function inboxSubject(agentId: string): string {
  return `agent.${agentId}.inbox`;
}

export function agentOfInboxSubject(subject: string): string | null {
  const match = /^agent\.([^.]+)\.inbox$/.exec(subject);
  return match?.[1] ?? null;
}

/** The shard of an agent's index entries: FNV-1a of its id, modulo INDEX_SHARDS. Never changes. */
export function indexShard(agentId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < agentId.length; i++) hash = Math.imul(hash ^ agentId.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % INDEX_SHARDS;
}

const shardToken = (shard: number) => String(shard).padStart(2, "0");

export function indexStream(shard: number): string {
  return `ACP_INDEX_${shardToken(shard)}`;
}

/** A participant's index subject, in its shard's stream: the messages it sent, or those it received. */
export function participantIndexSubject(agentId: string, side: "sent" | "received"): string {
  return `acp.index.${shardToken(indexShard(agentId))}.${agentId}.${side}`;
}

/** An entry of the legacy index stream (LEGACY_INDEX_STREAM). */
export function pairIndexSubject(from: string, to: string): string {
  return `acp.index.${from}.${to}`;
}

/** Each broker instance answers here while it is connected to NATS (see orphans.ts). */
export function livenessSubject(instanceId: string): string {
  return `acp.broker.${instanceId}.alive`;
}

/** Messages routed to a broker instance are announced to it here (see routed.ts). */
export function routedSubject(instanceId: string): string {
  return `acp.broker.${instanceId}.routed`;
}

export function consumerName(agentId: string): string {
  return `acp-inbox-${agentId}`;
}

export function userBucket(name: string): string {
  return `${USER_BUCKET_PREFIX}${name}`;
}

/** KV options for every bucket the broker creates: one value per key, writes republished to the change feed. */
export function bucketOptions(
  bucket: string,
  replicas: number,
): {
  history: number;
  replicas: number;
  allow_direct: boolean;
  republish: { src: string; dest: string };
} {
  return {
    history: 1,
    replicas,
    // A direct get may be answered by a follower that has not applied the latest write yet. With
    // replicas, reads go to the leader, so a gateway sees what another one just wrote (a pair's
    // handshake, a status): read-your-writes across gateways. One replica has no follower to lag.
    allow_direct: replicas === 1,
    republish: { src: `$KV.${bucket}.>`, dest: `${CHANGES_PREFIX}.${bucket}.>` },
  };
}

/** The streams the broker creates, and the legacy index stream, kept only if it exists. */
function streamConfigs(policy: BrokerPolicy, replicas: number): (StreamSettings & { keepOnly?: true })[] {
  const common = {
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: replicas,
    allow_direct: true,
  };
  const index = {
    ...common,
    max_age: nanos(policy.recordRetentionMs),
    duplicate_window: nanos(Math.min(DUPLICATE_WINDOW_MS, policy.recordRetentionMs)),
  };
  return [
    {
      ...common,
      name: INBOX_STREAM,
      subjects: ["agent.*.inbox"],
      max_age: nanos(policy.retentionMs),
      duplicate_window: nanos(Math.min(DUPLICATE_WINDOW_MS, policy.retentionMs)),
    },
    ...Array.from({ length: INDEX_SHARDS }, (_, shard) => ({
      ...index,
      name: indexStream(shard),
      // Five tokens: no overlap with the legacy stream's four.
      subjects: [`acp.index.${shardToken(shard)}.*.*`],
    })),
    // Its entries expire with the status records they point at, as the shards' do.
    { ...index, name: LEGACY_INDEX_STREAM, subjects: ["acp.index.*.*"], keepOnly: true },
  ];
}

/** The settings `ensureStreams` gives a stream, max_age included. */
export type StreamSettings = Partial<StreamConfig> & { name: string; max_age: number };

/** A stream whose max_age is above the broker's: `MaxAgeLowering` (max-age.ts) brings it down after start. */
export interface LowerMaxAge {
  settings: StreamSettings;
  /** The stream's max_age at start, in nanoseconds (0: none). */
  from: number;
}

/**
 * Creates the streams, or brings an existing one to these settings (retention, replicas), and
 * returns the streams whose max_age is to be lowered. A lower max_age is not sent at start:
 * nats-server expires the backlog it makes due inside the update request, one message at a time
 * and for every consumer of the stream (minutes on a week-old inbox stream), so the stream keeps
 * its max_age here and `MaxAgeLowering` lowers it in steps once the broker is open.
 */
export async function ensureStreams(
  jsm: JetStreamManager,
  policy: BrokerPolicy,
  replicas: number,
): Promise<LowerMaxAge[]> {
  // Eighteen streams: one round of requests, not eighteen.
  const lowerings = await Promise.all(
    streamConfigs(policy, replicas).map(({ keepOnly, ...settings }) => ensureStream(jsm, settings, keepOnly)),
  );
  return lowerings.filter((lowering) => lowering !== null);
}

async function ensureStream(
  jsm: JetStreamManager,
  settings: StreamSettings,
  keepOnly: true | undefined,
): Promise<LowerMaxAge | null> {
  try {
    const current = (await jsm.streams.info(settings.name)).config;
    const lower = lowers(current.max_age, settings.max_age);
    const now = lower ? { ...settings, max_age: current.max_age } : settings;
    if (
      current.max_age !== now.max_age ||
      current.duplicate_window !== now.duplicate_window ||
      current.num_replicas !== now.num_replicas ||
      current.allow_direct !== true
    ) {
      await jsm.streams.update(now.name, now);
    }
    return lower ? { settings, from: current.max_age } : null;
  } catch (error) {
    if (!(error instanceof JetStreamApiError) || error.code !== 10059) throw error;
    if (!keepOnly) await jsm.streams.add(settings);
    return null;
  }
}

/**
 * A KV bucket's TTL (its stream's max_age) brought to `ttlMs`, which `kvm.create` leaves as the
 * bucket was created: raised at once, or returned to be lowered after start, as `ensureStreams` does.
 */
export async function ensureBucketTtl(
  jsm: JetStreamManager,
  bucket: string,
  ttlMs: number,
): Promise<LowerMaxAge[]> {
  const name = `KV_${bucket}`;
  const current = (await jsm.streams.info(name)).config;
  const maxAge = nanos(ttlMs);
  if (current.max_age === maxAge) return [];
  // nats-server refuses a duplicate window longer than max_age.
  const settings = {
    ...current,
    max_age: maxAge,
    duplicate_window: Math.min(current.duplicate_window, maxAge),
  };
  if (lowers(current.max_age, maxAge)) return [{ settings, from: current.max_age }];
  await jsm.streams.update(name, settings);
  return [];
}

/** Whether a stream whose max_age is `current` (0: none) is to be lowered to `wanted`. */
function lowers(current: number, wanted: number): boolean {
  return current === 0 || current > wanted;
}

/**
 * One durable pull consumer per agent. With a backoff list JetStream takes the ack wait from it:
 * delivery n waits backoff[n-1] (the last value repeats). The delivery limit is the broker's (see
 * JETSTREAM_MAX_DELIVER).
 */
export function inboxConsumerConfig(
  agentId: string,
  policy: BrokerPolicy,
  maxInFlight: number,
): Partial<ConsumerConfig> {
  const backoff = backoffSchedule(policy).map((ms) => nanos(ms));
  return {
    durable_name: consumerName(agentId),
    filter_subject: inboxSubject(agentId),
    deliver_policy: DeliverPolicy.All,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(policy.ackWaitMs),
    max_deliver: JETSTREAM_MAX_DELIVER,
    max_ack_pending: maxInFlight,
    ...(backoff.length > 0 ? { backoff } : {}),
  };
}
