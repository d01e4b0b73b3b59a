/**
 * What became of the messages this gateway forwarded (bucket `federation-forwarded`, one entry per
 * message, keyed by its local sender and id): when each reached its peer, and the remote recipient's progress, which this gateway
 * asks the peer for (POST /federation/v1/status) until each is settled. The sender's status
 * (`acp status`, GET /api/v1/messages/:id/status) reads it through `progress`.
 */
import type { Broker, KvBucket, MessageRecord } from "../../broker/index.js";
import { messageKey } from "../../broker/validation.js";
import { addressOf, localPartOf } from "../../protocol/index.js";
import type { RemoteProgress } from "../../gateway/remote.js";
import { type DeliveryStatus, MAX_STATUS_IDS, type StatusResponse } from "../../wire/federation.js";
import { domainOfInbox } from "./directory.js";

interface ForwardedEntry {
  peer: string;
  /** The local sender's agent id, and the message's id. */
  from: string;
  id: string;
  to: string;
  forwardedAt: string;
  remote?: DeliveryStatus;
}

const SETTLED = new Set(["acknowledged", "failed", "expired"]);
/** Entries are kept as long as the status records of the broker: then forgotten. */
const KEEP_MS = 30 * 24 * 60 * 60_000;

/** A forwarded message as the peer names it: its sender's address and its id. */
export interface SentRef {
  from: string;
  id: string;
}

export type AskStatus = (peer: string, messages: SentRef[]) => Promise<StatusResponse>;

export class ForwardedLog {
  private readonly bucket: KvBucket<ForwardedEntry>;
  /** Forwarded messages whose remote status is not settled, per peer (by entry key), oldest first. */
  private readonly unsettled = new Map<string, Map<string, SentRef>>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    broker: Broker,
    /** This gateway's domain: its senders' addresses. */
    private readonly domain: string,
    private readonly ask: AskStatus,
    private readonly pollMs: number,
  ) {
    this.bucket = broker.kv<ForwardedEntry>("federation-forwarded");
  }

  /** Reads back what was forwarded and is not settled, then polls peers every `pollMs`. */
  async start(): Promise<void> {
    const cutoff = Date.now() - KEEP_MS;
    for (const key of await this.bucket.keys()) {
      const entry = await this.bucket.get(key);
      if (!entry) continue;
      if (Date.parse(entry.value.forwardedAt) < cutoff) await this.bucket.delete(key);
      else if (!SETTLED.has(entry.value.remote?.status ?? "")) this.track(key, entry.value);
    }
    this.timer = setInterval(() => void this.poll(), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Messages the peer stored (accepted or already had): local sender, id, recipient address. */
  async forwarded(peer: string, messages: { from: string; id: string; to: string }[]): Promise<void> {
    const forwardedAt = new Date().toISOString();
    await Promise.all(
      messages.map(async ({ from, id, to }) => {
        const entry: ForwardedEntry = { peer, from, id, to, forwardedAt };
        const key = messageKey({ from, id });
        await this.bucket.put(key, entry);
        this.track(key, entry);
      }),
    );
  }

  /** The end-to-end status of a message queued here for a peer; undefined for any other message. */
  async progress(record: MessageRecord & { envelope?: string | null }): Promise<RemoteProgress | undefined> {
    const peer = domainOfInbox(record.to);
    if (peer === undefined) return undefined;
    // Acknowledged here: the peer stored it. Expired here: it may have reached the peer just before.
    const entry =
      record.status === "acknowledged" || record.status === "expired"
        ? (await this.bucket.get(messageKey(record)))?.value
        : undefined;
    if (!entry) {
      // Still queued here, refused by the peer (a dead letter), or expired before it got there.
      const status =
        record.status === "delivered" || record.status === "acknowledged" ? "queued" : record.status;
      return {
        to: recipientOf(record.envelope) ?? `@${peer}`,
        peer,
        status,
        ...(record.failedAt && { failedAt: record.failedAt }),
        ...(record.expiredAt && { expiredAt: record.expiredAt }),
        ...(record.deadLetter && { deadLetter: record.deadLetter }),
      };
    }
    const remote = entry.remote;
    const known = remote && remote.status !== "unknown" && remote.status !== "queued";
    return {
      to: entry.to,
      peer,
      status: known ? (remote.status as RemoteProgress["status"]) : "forwarded",
      forwardedAt: entry.forwardedAt,
      ...(remote?.deliveredAt && { deliveredAt: remote.deliveredAt }),
      ...(remote?.acknowledgedAt && { acknowledgedAt: remote.acknowledgedAt }),
      ...(remote?.failedAt && { failedAt: remote.failedAt }),
      ...(remote?.expiredAt && { expiredAt: remote.expiredAt }),
      ...(remote?.retryCount !== undefined && { retryCount: remote.retryCount }),
      ...(remote?.deadLetter && { deadLetter: remote.deadLetter }),
    };
  }

  private track(key: string, entry: ForwardedEntry): void {
    let refs = this.unsettled.get(entry.peer);
    if (!refs) {
      refs = new Map();
      this.unsettled.set(entry.peer, refs);
    }
    refs.set(key, { from: addressOf(entry.from, this.domain), id: entry.id });
  }

  /** Asks each peer for the status of what it has not settled yet, oldest first, a batch each. */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      for (const [peer, refs] of this.unsettled) {
        if (refs.size === 0) continue;
        const batch = [...refs.values()].slice(0, MAX_STATUS_IDS);
        let answer: StatusResponse;
        try {
          answer = await this.ask(peer, batch);
        } catch {
          continue; // unreachable: asked again next time
        }
        try {
          await Promise.all(answer.statuses.map((status) => this.record(peer, refs, status)));
        } catch {
          // The store is unavailable (a NATS outage, or the gateway closing): the entries stay
          // unsettled and are asked about again next time.
        }
      }
    } finally {
      this.polling = false;
    }
  }

  private async record(peer: string, refs: Map<string, SentRef>, status: DeliveryStatus): Promise<void> {
    // Only an answer about a message asked for counts: a peer cannot touch another's entries.
    const key = messageKey({ from: localPartOf(status.from), id: status.id });
    if (refs.get(key)?.from !== status.from) return;
    const entry = await this.bucket.get(key);
    if (!entry || entry.value.peer !== peer) {
      refs.delete(key);
      return;
    }
    if (SETTLED.has(status.status)) refs.delete(key);
    if (JSON.stringify(entry.value.remote) !== JSON.stringify(status)) {
      await this.bucket.put(key, { ...entry.value, remote: status });
    }
  }
}

function recipientOf(envelope: string | null | undefined): string | undefined {
  if (!envelope) return undefined;
  try {
    type Carrier = { headers?: Record<string, unknown> };
    const parsed = JSON.parse(envelope) as { params?: Carrier; result?: Carrier; error?: { data?: Carrier } };
    const to = (parsed.params ?? parsed.result ?? parsed.error?.data)?.headers?.["recipient-id"];
    return typeof to === "string" ? to : undefined;
  } catch {
    return undefined;
  }
}
