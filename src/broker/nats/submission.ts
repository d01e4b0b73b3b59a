import { headers } from "@nats-io/transport-node";
import { DEFAULT_PRIORITY, priorityRank } from "../../protocol/priority.js";
import { BrokerError } from "../errors.js";
import type { BrokerPolicy } from "../policy.js";
import { currentStatus } from "../records.js";
import type { SubmitInput, SubmitResult } from "../types.js";
import { refKey } from "../validation.js";
import { Header, inboxSubject, participantIndexSubject } from "./layout.js";
import { type IndexEntry, indexPayload } from "./listing.js";
import type { StreamPublisher } from "./publisher.js";
import type { StatusDoc, StatusStore } from "./status-store.js";

/**
 * Bytes of `max_payload` kept for the envelope's headers: the longest id, sender and method the
 * broker accepts, the times and the header names take under 600 bytes.
 */
export const HEADER_ROOM = 1024;
/** nats-server's default `max_payload` (1 MiB), for the moment before the server's INFO arrived. */
const DEFAULT_MAX_PAYLOAD = 1_048_576;

/** The largest envelope a server with this `max_payload` takes, headers included. */
export function maxEnvelopeBytes(maxPayload: number | undefined): number {
  return (maxPayload ?? DEFAULT_MAX_PAYLOAD) - HEADER_ROOM;
}

/** Refuses an envelope the server would refuse, before anything is published. */
export function checkEnvelopeSize(envelope: string, maxPayload: number | undefined): void {
  const limit = maxEnvelopeBytes(maxPayload);
  // At most 3 bytes per UTF-16 unit: short envelopes skip the byte count.
  if (envelope.length * 3 <= limit) return;
  const size = Buffer.byteLength(envelope);
  if (size > limit) {
    throw new BrokerError(
      "invalid_argument",
      `submit: envelope is ${size} bytes; this NATS server takes at most ${limit} (its max_payload less ${HEADER_ROOM} for headers)`,
      { field: "envelope" },
    );
  }
}

/**
 * Publishes the envelope and its two index entries (the sender's and the recipient's), then creates
 * the status record; sorts out duplicates. Run it under the status store's lock for the id (see NatsBroker.submit).
 */
export async function storeMessage(
  publisher: StreamPublisher,
  statuses: StatusStore,
  policy: BrokerPolicy,
  input: SubmitInput,
  queuedAt: number,
  usageBytes: number | undefined,
): Promise<SubmitResult> {
  const h = headers();
  // The dedup key is the sender's and the id: each sender has its own id namespace (MessageRef).
  // It names the sender too, so no header of its own does.
  h.set("Nats-Msg-Id", refKey(input));
  h.set(Header.Kind, input.kind);
  h.set(Header.Method, input.method);
  h.set(Header.SubmittedAt, input.submittedAt);
  h.set(Header.QueuedAt, String(queuedAt));
  if (input.priority !== undefined && input.priority !== DEFAULT_PRIORITY)
    h.set(Header.Priority, String(priorityRank(input.priority)));
  if (input.route) h.set(Header.Route, input.route);
  if (input.replyTo) h.set(Header.ReplyTo, input.replyTo);
  const entry: IndexEntry = {
    id: input.id,
    from: input.from,
    to: input.to,
    kind: input.kind,
    method: input.method,
    submittedAt: input.submittedAt,
    queuedAt,
  };
  // Every publish starts before any await, so submit order per pair is stream order. The index
  // entries carry no Nats-Msg-Id: a second entry for a message (a duplicate submit) is skipped by
  // `list`, as the record names the entries it counts (`indexSeq`, `receivedIndexSeq`, set below).
  const [ack, sentAck, receivedAck] = await Promise.all([
    publisher.publish(inboxSubject(input.to), input.envelope, h),
    publisher.publish(participantIndexSubject(input.from, "sent"), indexPayload(entry, "sent")),
    publisher.publish(participantIndexSubject(input.to, "received"), indexPayload(entry, "received")),
  ]);
  const doc: StatusDoc = {
    ...entry,
    status: "queued",
    attempts: 0,
    seq: ack.seq,
    indexSeq: sentAck.seq,
    receivedIndexSeq: receivedAck.seq,
    ...(usageBytes !== undefined && { usageBytes }),
    ...(input.replyTo && { replyTo: input.replyTo }),
    ...(input.route && { route: input.route }),
  };
  // The record is written after the message is durable: a record never points at nothing.
  const created = !ack.duplicate && (await statuses.create(doc));
  if (created) return { id: input.id, status: "queued", duplicate: false };
  // Either a duplicate (within the dedup window, or later: the record exists), or the recipient's
  // inbox created the record first from the message headers.
  const existing = await statuses.read(input);
  if (!existing) {
    // Duplicate within the window of a submit that stopped before writing its record.
    await statuses.create(doc);
    return { id: input.id, status: "queued", duplicate: true };
  }
  const current = existing.value;
  const duplicate = ack.duplicate || current.seq !== ack.seq;
  // A record the recipient's inbox wrote from the headers names no index entry, so `list` shows
  // every entry of the message: once there are two, the resubmission's become the ones it shows.
  if (duplicate && current.indexSeq === undefined)
    await statuses.setIndexEntries(input, { indexSeq: sentAck.seq, receivedIndexSeq: receivedAck.seq });
  // A new message is reported as stored (queued), even if its inbox already picked it up.
  const status = duplicate ? currentStatus(current, policy, Date.now()) : "queued";
  return { id: input.id, status, duplicate };
}
