/**
 * The inbound bound of each peer: what one peer's agents have pending at this gateway (stored here,
 * not yet acknowledged, failed or expired), in messages and envelope bytes, so one peer cannot take
 * the room every other peer and local sender share. A message past it is refused with -32013
 * (`quota: "peer-inbound-messages"` or `"peer-inbound-bytes"`, `retryAfterSeconds`), which the
 * sending gateway's forwarder takes as "not now": it keeps the message and sends it again after its
 * backoff, so nothing is lost. Counted by this gateway process from what it accepted (the broker's
 * change feed settles it; when a peer is at its bound, what it still counts is checked against the
 * broker, since the feed may drop an event).
 */
import { QUOTA_RETRY_AFTER_SECONDS } from "../../broker/errors.js";
import type { Broker, MessageRecord, MessageRef, Unsubscribe } from "../../broker/index.js";
import type { Metrics } from "../../gateway/metrics.js";
import { messageKey } from "../../broker/validation.js";
import { AcpError } from "../../protocol/index.js";

export interface InboundBound {
  messages: number;
  bytes: number;
}

/** What one peer may have pending here when no bound is configured. */
export const DEFAULT_PEER_INBOUND: InboundBound = { messages: 100_000, bytes: 1024 * 1024 * 1024 };

/** Pending messages checked against the broker per pass when a peer is at its bound. */
const RECHECK_BATCH = 500;
const SETTLED = new Set(["acknowledged", "failed", "expired"]);

interface Held {
  ref: MessageRef;
  bytes: number;
  acceptedAt: number;
  /** The broker stored it (until then a recheck must not take "unknown" for "gone"). */
  stored: boolean;
}

/** A message counted before it is stored: `stored` once the broker has it, `release` if it does not. */
export interface Reservation {
  stored(): void;
  release(): void;
}

const NOTHING_RESERVED: Reservation = { stored: () => undefined, release: () => undefined };

interface PeerPending {
  messages: Map<string, Held>;
  bytes: number;
}

export class PeerInbound {
  private readonly peers = new Map<string, PeerPending>();
  /** The peer of each message counted, by its broker key. */
  private readonly peerOf = new Map<string, string>();
  private readonly rechecking = new Set<string>();
  private unsubscribe: Unsubscribe | undefined;

  constructor(
    private readonly broker: Broker,
    private readonly bound: InboundBound,
    /** The broker's retention: a message accepted longer ago than this has expired. */
    private readonly retentionMs: number,
    metrics: Metrics,
  ) {
    metrics.addCollector(() => {
      const peers = [...this.peers];
      return [
        {
          name: "acp_federation_inbound_pending",
          help: "messages a peer's agents have pending here (its inbound bound counts them), by peer",
          type: "gauge",
          samples: peers.map(([peer, pending]) => ({ labels: { peer }, value: pending.messages.size })),
        },
        {
          name: "acp_federation_inbound_pending_bytes",
          help: "envelope bytes a peer's agents have pending here, by peer",
          type: "gauge",
          samples: peers.map(([peer, pending]) => ({ labels: { peer }, value: pending.bytes })),
        },
      ];
    });
  }

  async start(): Promise<void> {
    this.unsubscribe = await this.broker.events((event) => {
      if (event.type === "message.status" && SETTLED.has(event.message.status)) this.settled(event.message);
    });
  }

  stop(): void {
    this.unsubscribe?.();
  }

  /**
   * Counts a message `peer` delivers (`ref`: its broker name and id) before it is stored, or refuses
   * it when the peer is at its bound. Release it when it was not stored after all (or was stored
   * before); a message already counted is not counted twice.
   */
  reserve(peer: string, ref: MessageRef, bytes: number): Reservation {
    const key = messageKey(ref);
    if (this.peerOf.has(key)) return NOTHING_RESERVED;
    const pending = this.pendingOf(peer);
    const quota =
      pending.messages.size + 1 > this.bound.messages
        ? ("peer-inbound-messages" as const)
        : pending.bytes + bytes > this.bound.bytes
          ? ("peer-inbound-bytes" as const)
          : undefined;
    if (quota !== undefined) {
      void this.recheck(peer);
      const [limit, used, unit] =
        quota === "peer-inbound-messages"
          ? [this.bound.messages, pending.messages.size, "messages"]
          : [this.bound.bytes, pending.bytes, "bytes"];
      throw new AcpError(
        "RateLimited",
        `${peer}'s agents already have ${used} ${unit} waiting at this gateway, the most one peer may (${limit} ${unit}); send it again once its recipients took some`,
        { quota, limit, used, retryAfterSeconds: QUOTA_RETRY_AFTER_SECONDS },
      );
    }
    const held: Held = { ref, bytes, acceptedAt: Date.now(), stored: false };
    pending.messages.set(key, held);
    pending.bytes += bytes;
    this.peerOf.set(key, peer);
    return {
      stored: () => {
        held.stored = true;
      },
      release: () => this.forget(key),
    };
  }

  private pendingOf(peer: string): PeerPending {
    let pending = this.peers.get(peer);
    if (!pending) {
      pending = { messages: new Map(), bytes: 0 };
      this.peers.set(peer, pending);
    }
    return pending;
  }

  private settled(record: MessageRecord): void {
    this.forget(messageKey(record));
  }

  private forget(key: string): void {
    const peer = this.peerOf.get(key);
    if (peer === undefined) return;
    this.peerOf.delete(key);
    const pending = this.peers.get(peer);
    const held = pending?.messages.get(key);
    if (!pending || !held) return;
    pending.messages.delete(key);
    pending.bytes -= held.bytes;
    if (pending.messages.size === 0) this.peers.delete(peer);
  }

  /** Asks the broker about the oldest messages counted for `peer`, and uncounts those settled. */
  private async recheck(peer: string): Promise<void> {
    if (this.rechecking.has(peer)) return;
    this.rechecking.add(peer);
    try {
      const oldest = [...(this.peers.get(peer)?.messages ?? new Map<string, Held>())].slice(0, RECHECK_BATCH);
      const now = Date.now();
      await Promise.all(
        oldest.map(async ([key, held]) => {
          if (now >= held.acceptedAt + this.retentionMs) return this.forget(key);
          if (!held.stored) return;
          const record = await this.broker.status(held.ref).catch(() => undefined);
          if (record === null || (record && SETTLED.has(record.status))) this.forget(key);
        }),
      );
    } finally {
      this.rechecking.delete(peer);
    }
  }
}
