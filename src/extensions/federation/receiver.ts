/**
 * What a peer delivers: each message of a transfer is checked (the sender an agent of the peer's
 * own domain, its home directory's key and principal) and handed to the relay as an arrival, which
 * runs every other check (structure, signature, recipient here and nowhere else, age, versions, the
 * handshake gate), stores it once by message id, audits and delivers it. And the status of what a
 * peer delivered, for the peer to show its senders.
 */
import type { Broker } from "../../broker/index.js";
import { brokerToAcp } from "../../broker/errors.js";
import type { RateLimiter } from "../../gateway/rate-limit.js";
import type { Relay } from "../../gateway/relay.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import {
  AcpError,
  domainOf,
  headersOf,
  parseMessageText,
  type AcpMessage,
  validateMessage,
} from "../../protocol/index.js";
import { headerPointer } from "../../protocol/validate.js";
import { signatureKeyId } from "../../protocol/jws.js";
import type { DeliveryStatus, TransferOutcome } from "../../wire/federation.js";
import { type RemoteDirectory, remoteAgentOf, remoteSenderInbox } from "./directory.js";
import type { PeerInbound } from "./inbound.js";
import type { PeerLinks } from "./links.js";
import type { PeerRecord } from "./peers.js";

export interface ReceiverDeps {
  relay: Relay;
  broker: Broker;
  directory: RemoteDirectory;
  links: PeerLinks;
  /** Messages per second from one peer. */
  limiter: RateLimiter;
  /** What one peer may have pending here. */
  inbound: PeerInbound;
  /** How old an arriving message may be: it may have waited this long in the peer's queue. */
  maxAgeMs: number;
}

/** What is read of a message before the relay checks it: enough to find its sender's key. */
interface Arrival {
  text: string;
  message: AcpMessage | undefined;
  sender: string | undefined;
  kid: string | undefined;
  timestamp: string | undefined;
}

export class Receiver {
  constructor(private readonly deps: ReceiverDeps) {}

  /** Stores what `peer` delivered; one outcome per message, in order. */
  async receive(peer: PeerRecord, texts: string[]): Promise<TransferOutcome[]> {
    const arrivals = texts.map(read);
    const records = await this.senderRecords(peer, arrivals);
    // Submitted in order without waiting in between: the relay keeps each sender's order.
    const outcomes = arrivals.map((arrival) => this.submit(peer, arrival, records));
    const results = await Promise.all(outcomes);
    this.deps.links.received(peer.domain, results.filter((r) => r.outcome === "accepted").length);
    return results;
  }

  private submit(
    peer: PeerRecord,
    arrival: Arrival,
    records: Map<string, Awaited<ReturnType<RemoteDirectory["lookup"]>> | Error>,
  ): Promise<TransferOutcome> {
    const id = idOf(arrival.message);
    try {
      this.takeRate(peer.domain);
      const sender = this.senderOf(peer, arrival, records);
      const via = remoteSenderInbox(sender.record.agentId);
      const bytes = Buffer.byteLength(arrival.text);
      // Counted before it is stored, so the messages of one transfer cannot pass the bound together.
      const reservation = this.deps.inbound.reserve(peer.domain, { from: via, id: id ?? "" }, bytes);
      return this.deps.relay
        .submit(sender, arrival.text, bytes, { arrived: { via, maxAgeMs: this.deps.maxAgeMs } })
        .then(
          (result): TransferOutcome => {
            if (result.duplicate) reservation.release();
            else reservation.stored();
            return { id: result.id, outcome: result.duplicate ? "duplicate" : "accepted" };
          },
          (err: unknown) => {
            reservation.release();
            return this.refused(peer, id, err);
          },
        );
    } catch (err) {
      return Promise.resolve(this.refused(peer, id, err));
    }
  }

  /** One message of the peer's rate (per second, with a burst); past it: -32013, quota peer-rate. */
  private takeRate(domain: string): void {
    try {
      this.deps.limiter.take(domain);
    } catch (err) {
      if (!(err instanceof AcpError)) throw err;
      throw new AcpError("RateLimited", `${domain} delivers more messages per second than it may`, {
        ...err.data,
        quota: "peer-rate",
      });
    }
  }

  private refused(peer: PeerRecord, id: string | null, thrown: unknown): TransferOutcome {
    const err = brokerToAcp(thrown);
    const error =
      err instanceof AcpError
        ? err.toJSON()
        : { code: -32603, message: "the receiving gateway failed while storing the message" };
    this.deps.links.refused(peer.domain, err instanceof AcpError ? err.kind : "InternalError");
    return { id, outcome: "refused", error };
  }

  /** The home directory's record of each sender, fetched once per transfer (again for an unknown key). */
  private async senderRecords(peer: PeerRecord, arrivals: Arrival[]) {
    const records = new Map<string, Awaited<ReturnType<RemoteDirectory["lookup"]>> | Error>();
    const senders = new Map<string, Set<string>>();
    for (const { sender, kid } of arrivals) {
      if (sender === undefined || domainOf(sender) !== peer.domain) continue;
      const kids = senders.get(sender) ?? new Set();
      if (kid) kids.add(kid);
      senders.set(sender, kids);
    }
    await Promise.all(
      [...senders].map(async ([sender, kids]) => {
        try {
          let record = await this.deps.directory.lookup(sender, { toVerify: true });
          const known = (kid: string) =>
            record &&
            (remoteAgentOf(record, kid) !== undefined || record.keyHistory.some((k) => k.kid === kid));
          if ([...kids].some((kid) => !known(kid)))
            record = await this.deps.directory.lookup(sender, { fresh: true, toVerify: true });
          records.set(sender, record);
        } catch (err) {
          records.set(sender, err as Error);
        }
      }),
    );
    return records;
  }

  private senderOf(
    peer: PeerRecord,
    arrival: Arrival,
    records: Map<string, Awaited<ReturnType<RemoteDirectory["lookup"]>> | Error>,
  ): ResolvedAgent {
    const { message, sender } = arrival;
    if (!message || sender === undefined) {
      // Not a readable envelope: refused naming exactly what is wrong with it.
      validateMessage(parseMessageText(arrival.text), { envelope: true });
      throw new AcpError("InvalidParams", "the envelope names no sender");
    }
    if (domainOf(sender) !== peer.domain) {
      throw new AcpError(
        "Forbidden",
        `${peer.domain} may deliver messages of its own agents only, not of ${sender}`,
        {
          problems: [
            { path: headerPointer(message, "agent-id"), message: `must be an address at ${peer.domain}` },
          ],
        },
      );
    }
    const record = records.get(sender);
    if (record instanceof Error) throw record;
    if (!record) {
      throw new AcpError("UnknownKey", `${peer.domain} has no agent ${sender}`, {
        problems: [{ path: headerPointer(message, "agent-id"), message: "not in its home directory" }],
      });
    }
    if (record.revokedAt) {
      throw new AcpError("Unauthorized", `${sender} was revoked by ${peer.domain} at ${record.revokedAt}`, {
        problems: [{ path: headerPointer(message, "agent-id"), message: "revoked" }],
      });
    }
    const agent = remoteAgentOf(record, arrival.kid, arrival.timestamp);
    if (!agent) {
      throw new AcpError("UnknownKey", `${arrival.kid} is not a key of ${sender} in its home directory`, {
        problems: [{ path: "/signature", message: "not a key of the sender" }],
        kid: arrival.kid,
      });
    }
    return agent;
  }

  /**
   * The status of messages `peer` delivered here, each named by its sender's address and id; one
   * of a sender of another domain, or that the peer never delivered, reads as unknown.
   */
  async statuses(peer: PeerRecord, refs: { from: string; id: string }[]): Promise<DeliveryStatus[]> {
    return Promise.all(
      refs.map(async ({ from, id }): Promise<DeliveryStatus> => {
        const record =
          domainOf(from) === peer.domain
            ? await this.deps.broker.status({ from: remoteSenderInbox(from), id }).catch(() => null)
            : null;
        if (!record) return { from, id, status: "unknown" };
        return {
          from,
          id,
          status: record.status,
          ...(record.deliveredAt && { deliveredAt: record.deliveredAt }),
          ...(record.acknowledgedAt && { acknowledgedAt: record.acknowledgedAt }),
          ...(record.failedAt && { failedAt: record.failedAt }),
          ...(record.expiredAt && { expiredAt: record.expiredAt }),
          retryCount: record.retryCount,
          ...(record.deadLetter && {
            deadLetter: { ...record.deadLetter, detail: record.deadLetter.detail.slice(0, 2000) },
          }),
        };
      }),
    );
  }
}

function read(text: string): Arrival {
  let message: AcpMessage | undefined;
  try {
    const parsed = parseMessageText(text);
    message = typeof parsed === "object" && parsed !== null ? (parsed as AcpMessage) : undefined;
  } catch {
    message = undefined;
  }
  const headers = message ? headersOf(message) : undefined;
  const sender = typeof headers?.["agent-id"] === "string" ? headers["agent-id"] : undefined;
  const timestamp = typeof headers?.timestamp === "string" ? headers.timestamp : undefined;
  let kid: string | undefined;
  try {
    kid = message ? signatureKeyId(message) : undefined;
  } catch {
    kid = undefined;
  }
  return { text, message, sender, kid, timestamp };
}

function idOf(message: AcpMessage | undefined): string | null {
  const id = message ? headersOf(message)?.["message-id"] : undefined;
  return typeof id === "string" ? id.slice(0, 200) : null;
}
