import type { AuditEntry, AuditEntryInput } from "../../audit/index.js";
import { auditEntryFor, type SummaryContext } from "../../audit/index.js";
import { requestLabel } from "../../audit/summary.js";
import type { Broker, BrokerEvent, MessageRecord, MessageStatus, Unsubscribe } from "../../broker/index.js";
import { refKey } from "../../broker/validation.js";
import type { Registry } from "../../gateway/registry.js";
import type { AcceptedListener } from "../../gateway/relay-types.js";
import type { MessageType } from "../../protocol/index.js";

/** Accepted messages whose change event has not come yet (oldest dropped first). */
const PENDING_ENTRIES = 4096;

/** One relayed message as principals see it: who, what kind, a one-line summary, never the payload. */
export interface FeedItem {
  /** The message-id header (the gateway's id for it). */
  id: string;
  /** When the gateway accepted it. */
  at: string;
  from: { agent: string; principal: string | null };
  to: { agent: string; principal: string | null };
  type: MessageType;
  method: string;
  summary: string;
  /** `sender`: the summary is the sending agent's own words (signed with the message); else the gateway's. */
  summaryBy: "sender" | "gateway";
  /** End-to-end encrypted: the summary only says that an exchange occurred. */
  encrypted: boolean;
  /** Signed by the gateway on the sender's behalf, with the key it holds for a custodial agent. */
  custodial?: true;
  /** The handshake step, for announce and capabilities messages. */
  step?: string;
  /** An error response's code and message. */
  error?: { code: number; message: string };
  /** Delivery status, when known. */
  status?: MessageStatus;
  retryCount?: number;
}

/** Events the dashboard's live stream is built from. */
export type LiveEvent =
  | { type: "summary"; item: FeedItem }
  | {
      type: "status";
      id: string;
      from: string;
      to: string;
      status: MessageStatus;
      retryCount: number;
    }
  | { type: "kv"; bucket: string; key: string; op: "put" | "delete"; value: unknown };

/** What an encrypted exchange is shown as, everywhere (feed, detail, chat webhooks). */
export function encryptedSummary(from: string, to: string): string {
  return `An encrypted exchange occurred between ${from} and ${to}.`;
}

type EntryLike = Pick<
  AuditEntryInput,
  | "from"
  | "to"
  | "type"
  | "method"
  | "id"
  | "messageId"
  | "step"
  | "encrypted"
  | "custodial"
  | "error"
  | "summary"
  | "summaryBy"
>;

/**
 * A feed item from a relay audit entry (or the entry built for a live message). Built with every
 * field in one order, optional ones undefined (JSON leaves them out), so all items share one shape:
 * the live feed makes one per message and varying shapes made every access to them slow.
 */
export function feedItemOf(
  entry: EntryLike,
  at: string,
  messageId: string | undefined = entry.messageId,
): FeedItem | undefined {
  // An orchestrator's command-layer entry is not a relayed message.
  if (entry.type === "command") return undefined;
  const id = messageId ?? (entry.id === null ? undefined : String(entry.id));
  if (id === undefined) return undefined;
  const encrypted = entry.encrypted === true;
  return {
    id,
    at,
    from: entry.from,
    to: entry.to,
    type: entry.type,
    method: entry.method,
    summary: encrypted ? encryptedSummary(entry.from.agent, entry.to.agent) : entry.summary,
    summaryBy: entry.summaryBy === "sender" && !encrypted ? "sender" : "gateway",
    encrypted,
    custodial: entry.custodial ? true : undefined,
    step: entry.step || undefined,
    error: entry.error && !encrypted ? entry.error : undefined,
    status: undefined,
    retryCount: undefined,
  };
}

export function feedItemOfAudit(entry: AuditEntry): FeedItem | undefined {
  return feedItemOf(entry, entry.ts);
}

/** A feed item for a message record and its stored envelope (null once retention removed it). */
export function feedItemOfMessage(
  record: MessageRecord,
  envelope: string | null,
  principals: { from: string | null; to: string | null },
  context?: SummaryContext,
): FeedItem {
  let entry: EntryLike | undefined;
  if (envelope !== null) {
    try {
      entry = auditEntryFor(JSON.parse(envelope), {
        direction: "sent",
        channel: `agent.${record.to}.inbox`,
        ...(principals.from !== null ? { self: { principal: principals.from } } : {}),
        ...(principals.to !== null ? { peer: { principal: principals.to } } : {}),
        ...(context ? { context } : {}),
      });
    } catch {
      // Stored envelopes were validated on the way in; if one still cannot be read, say only what is known.
    }
  }
  const item =
    (entry && feedItemOf(entry, record.queuedAt, record.id)) ??
    ({
      id: record.id,
      at: record.queuedAt,
      from: { agent: record.from, principal: principals.from },
      to: { agent: record.to, principal: principals.to },
      type: record.kind,
      method: record.method,
      summary: `${record.from} sent ${record.to} a ${record.kind} (${record.method}); its content is no longer kept`,
      summaryBy: "gateway",
      encrypted: false,
    } satisfies FeedItem);
  return { ...item, status: record.status, retryCount: record.retryCount };
}

/**
 * The live side of the feed: one subscription to the broker's change feed per gateway, turned into
 * feed items (a new message is read once, whatever the number of viewers) and fanned out. It also
 * keeps the most recent items, so the feed shows messages relayed by other gateways on the same NATS.
 */
export class LiveFeed {
  private readonly listeners = new Set<(event: LiveEvent) => void>();
  /** By `refKey` (sender and id: message ids are per sender). */
  private readonly recentById = new Map<string, FeedItem>();
  /** Recent items read back from the store (by `refKey`): relayed by another gateway, not in this one's audit. */
  private readonly readBackKeys = new Set<string>();
  /** Entries the relay built for messages this gateway accepted, until their change event comes. */
  private readonly relayedEntries = new Map<string, EntryLike>();
  private unsubscribe: Unsubscribe | undefined;
  private unsubscribeAccepted: Unsubscribe | undefined;
  /**
   * Events are handled one after another, so a status never overtakes the item it updates. Most are
   * handled at once; one that must read the store back (a message another gateway relayed) starts
   * this chain, and events behind it wait in it until it is done.
   */
  private chain: Promise<void> | undefined;

  constructor(
    private readonly broker: Broker,
    private readonly registry: Registry,
    private readonly onError: (err: unknown) => void,
    /** The relay's accepted-message event (`relay.onAccepted`): summaries made once, on the way in. */
    private readonly onAccepted?: (listener: AcceptedListener) => Unsubscribe,
    private readonly capacity = 2000,
  ) {}

  async start(): Promise<void> {
    this.unsubscribeAccepted = this.onAccepted?.(({ id: messageId, entry, stored }) => {
      const id = refKey({ from: entry.from.agent, id: messageId });
      // A resubmission or replay of an id never replaces the entry of the message stored under it.
      if (this.relayedEntries.has(id)) return;
      this.relayedEntries.set(id, entry);
      if (this.relayedEntries.size > PENDING_ENTRIES) {
        const oldest = this.relayedEntries.keys().next().value;
        if (oldest !== undefined) this.relayedEntries.delete(oldest);
      }
      const forget = () => {
        if (this.relayedEntries.get(id) === entry) this.relayedEntries.delete(id);
      };
      stored.then((result) => result.duplicate && forget(), forget);
    });
    this.unsubscribe = await this.broker.events((event) => this.enqueue(event));
  }

  async stop(): Promise<void> {
    this.unsubscribeAccepted?.();
    this.unsubscribeAccepted = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    await this.settled();
    this.listeners.clear();
  }

  subscribe(listener: (event: LiveEvent) => void): Unsubscribe {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The items seen live, oldest first, with their latest status. */
  recent(): FeedItem[] {
    return [...this.recentById.values()];
  }

  /** The recent items this gateway's relay did not hand over (another gateway on the same NATS relayed them). */
  recentFromElsewhere(): FeedItem[] {
    return [...this.readBackKeys].flatMap((key) => {
      const item = this.recentById.get(key);
      return item ? [item] : [];
    });
  }

  /** Everything queued so far has been turned into events (for tests and orderly shutdown). */
  async settled(): Promise<void> {
    while (this.chain) await this.chain;
  }

  private enqueue(event: BrokerEvent): void {
    if (this.chain) {
      this.chain = this.untilDone(this.chain.then(() => this.handle(event)));
      return;
    }
    try {
      const pending = this.handle(event);
      if (pending) this.chain = this.untilDone(pending);
    } catch (err) {
      this.onError(err);
    }
  }

  /** The chain while `pending` runs: it ends (back to handling at once) when nothing follows it. */
  private untilDone(pending: Promise<void>): Promise<void> {
    const chain: Promise<void> = pending.catch(this.onError).then(() => {
      if (this.chain === chain) this.chain = undefined;
    });
    return chain;
  }

  /** Handles `event` now, or returns the promise of the store read it needs first. */
  private handle(event: BrokerEvent): Promise<void> | undefined {
    if (event.type === "kv") {
      this.emit({ type: "kv", bucket: event.bucket, key: event.key, op: event.op, value: event.value });
      return undefined;
    }
    const record = event.message;
    const known = this.recentById.get(refKey(record));
    if (!known && record.status === "queued" && record.retryCount === 0) {
      const relayed = this.relayedItem(record);
      if (relayed) return this.add(relayed);
      return this.readBack(record).then((item) => {
        this.readBackKeys.add(refKey(record));
        this.add(item);
      });
    }
    if (known) {
      known.status = record.status;
      known.retryCount = record.retryCount;
    }
    if (this.listeners.size > 0)
      this.emit({
        type: "status",
        id: record.id,
        from: record.from,
        to: record.to,
        status: record.status,
        retryCount: record.retryCount,
      });
    return undefined;
  }

  private add(item: FeedItem): undefined {
    this.remember(item);
    // A copy: listeners may handle it later, and later status events change the kept item.
    if (this.listeners.size > 0) this.emit({ type: "summary", item: { ...item } });
    return undefined;
  }

  /** A message accepted by this gateway was summarised once already, by its relay. */
  private relayedItem(record: MessageRecord): FeedItem | undefined {
    const entry = this.relayedEntries.get(refKey(record));
    if (!entry) return undefined;
    this.relayedEntries.delete(refKey(record));
    const item = feedItemOf(entry, record.queuedAt, record.id);
    if (item) {
      item.status = record.status;
      item.retryCount = record.retryCount;
    }
    return item;
  }

  /** Another gateway on the same NATS relayed it (or its entry was dropped for room): read it back. */
  private async readBack(record: MessageRecord): Promise<FeedItem> {
    const [stored, fromPrincipal, toPrincipal] = await Promise.all([
      this.broker.get(record),
      this.principalOf(record.from),
      this.principalOf(record.to),
    ]);
    const envelope = stored?.envelope ?? null;
    const context = record.kind === "response" ? await this.answered(record, envelope) : undefined;
    return feedItemOfMessage(record, envelope, { from: fromPrincipal, to: toPrincipal }, context);
  }

  /**
   * What a response relayed elsewhere answers, as that gateway's relay knew it: the request stored
   * under the response's JSON-RPC id (the SDK's requests use their message-id), between the same two.
   */
  private async answered(
    record: MessageRecord,
    envelope: string | null,
  ): Promise<SummaryContext | undefined> {
    try {
      const id = envelope === null ? undefined : (JSON.parse(envelope) as { id?: unknown }).id;
      if (typeof id !== "string" && typeof id !== "number") return undefined;
      // The request this answers: sent (under the answer's JSON-RPC id) by whom the answer goes to.
      const request = await this.broker.get({ from: record.to, id: String(id) });
      if (!request?.envelope || request.to !== record.from) return undefined;
      return { inReplyTo: requestLabel(JSON.parse(request.envelope)) };
    } catch {
      return undefined;
    }
  }

  private async principalOf(agentId: string): Promise<string | null> {
    const live = await this.registry.resolve(agentId);
    return live?.record.principalId ?? (await this.registry.get(agentId))?.principalId ?? null;
  }

  private remember(item: FeedItem): void {
    this.recentById.set(refKey({ from: item.from.agent, id: item.id }), item);
    if (this.recentById.size > this.capacity) {
      const oldest = this.recentById.keys().next().value;
      if (oldest !== undefined) {
        this.recentById.delete(oldest);
        this.readBackKeys.delete(oldest);
      }
    }
  }

  private emit(event: LiveEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.onError(err);
      }
    }
  }
}
