/**
 * `list` on NATS. Each message has an index entry on its sender's subject and one on its
 * recipient's, in the index stream of each one's shard (layout.ts); a participant's list walks its
 * own subjects forward with direct gets ("next message on this subject from seq"). nats-server 2.9
 * finds the next entry of a subject from its per-block subject table only up to the block; inside
 * a block it reads every entry from `seq` to the next match. So each entry listed costs reading the
 * entries between it and the one before, about twice the shard's entries per entry of the
 * participant's: sixteen shards make that a sixteenth of one stream for everyone, and the blocks
 * without the subject are skipped from the table. Then, a page costs its entries, their status
 * records and the depth of the subject table, not the stream's length.
 */
import type { JetStreamManager } from "@nats-io/jetstream";
import type { MessageType } from "../../protocol/schemas.js";
import { BrokerError } from "../errors.js";
import type { BrokerPolicy } from "../policy.js";
import { buildRecord } from "../records.js";
import type { ListPage, ListQuery, MessageRecord } from "../types.js";
import {
  indexShard,
  indexStream,
  LEGACY_INDEX_STREAM,
  pairIndexSubject,
  participantIndexSubject,
} from "./layout.js";
import type { LegacyIndex } from "./legacy-index.js";
import type { StatusDoc, StatusStore } from "./status-store.js";

/** An index entry: its payload, and the participant its subject names. */
export interface IndexEntry {
  id: string;
  from: string;
  to: string;
  kind: MessageType;
  method: string;
  submittedAt: string;
  queuedAt: number;
}

/**
 * An entry's payload: the participant whose subject it is on is in its subject, the counterpart in
 * the payload (entries written before also carry the participant).
 */
export function indexPayload(entry: IndexEntry, side: "sent" | "received"): string {
  const { from, to, ...payload } = entry;
  return JSON.stringify(side === "sent" ? { ...payload, to } : { ...payload, from });
}

/** The entry stored on `subject`: `acp.index.<shard>.<agent>.<side>`, or the legacy `acp.index.<from>.<to>`. */
function indexEntryOf(subject: string, side: Side, payload: Partial<IndexEntry>): IndexEntry {
  const tokens = subject.split(".");
  const named =
    side === "pair"
      ? { from: tokens[2] ?? "", to: tokens[3] ?? "" }
      : side === "sent"
        ? { from: tokens[3] ?? "" }
        : { to: tokens[3] ?? "" };
  return { ...payload, ...named } as IndexEntry;
}

/** Which entry of its message an index entry is: the sender's, the recipient's, or the legacy one by pair. */
type Side = "sent" | "received" | "pair";

interface Scanned {
  seq: number;
  entry: IndexEntry;
  side: Side;
}

/** A subject to walk, and which of its entries to list (a counterpart the subject does not name). */
interface Walk {
  stream: string;
  subject: string;
  side: Side;
  keep?: (entry: IndexEntry) => boolean;
}

/** Where a listing stopped: the last legacy entry taken (null: the legacy stream is done) and shard entry. */
interface Position {
  legacy: number | null;
  shard: number;
}

/** Walks one index subject forward with direct gets. */
class SubjectScanner {
  private head: Scanned | null | undefined;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly walk: Walk,
    private nextSeq: number,
    private readonly legacy: LegacyIndex,
  ) {}

  async peek(): Promise<Scanned | null> {
    if (this.head === undefined) {
      const { stream, subject, side } = this.walk;
      if (side === "pair" && this.legacy.noneFrom(subject, this.nextSeq)) {
        this.head = null;
        return null;
      }
      const msg = await this.jsm.direct.getMessage(stream, { seq: this.nextSeq, next_by_subj: subject });
      this.head = msg ? { seq: msg.seq, entry: indexEntryOf(msg.subject, side, msg.json()), side } : null;
      if (!msg && side === "pair") this.legacy.noteNoneFrom(subject, this.nextSeq);
    }
    return this.head;
  }

  take(): void {
    if (this.head) this.nextSeq = this.head.seq + 1;
    this.head = undefined;
  }

  keeps(scanned: Scanned): boolean {
    return this.walk.keep?.(scanned.entry) ?? true;
  }
}

/**
 * The participant's own subjects holding what it may see, narrowed by from/to: a counterpart is
 * filtered here, as the embedded broker filters its sender or recipient index.
 */
function participantWalks(query: ListQuery): Walk[] {
  const { participant, from, to } = query;
  const stream = indexStream(indexShard(participant));
  const walk = (side: "sent" | "received", keep?: Walk["keep"]): Walk => ({
    stream,
    subject: participantIndexSubject(participant, side),
    side,
    ...(keep && { keep }),
  });
  if (from === participant) return [walk("sent", to === undefined ? undefined : (e) => e.to === to)];
  if (to === participant) return [walk("received", from === undefined ? undefined : (e) => e.from === from)];
  if (from !== undefined) return to === undefined ? [walk("received", (e) => e.from === from)] : [];
  if (to !== undefined) return [walk("sent", (e) => e.to === to)];
  // A message to itself is on both subjects: listed once, from the sender's.
  return [walk("sent"), walk("received", (e) => e.from !== participant)];
}

/** The legacy stream's subjects holding the participant's messages, narrowed by from/to. */
function pairWalks(query: ListQuery): Walk[] {
  const { participant, from, to } = query;
  let subjects: string[];
  if (from !== undefined && to !== undefined) {
    subjects = participant === from || participant === to ? [pairIndexSubject(from, to)] : [];
  } else if (from !== undefined) {
    subjects = [from === participant ? pairIndexSubject(from, "*") : pairIndexSubject(from, participant)];
  } else if (to !== undefined) {
    subjects = [to === participant ? pairIndexSubject("*", to) : pairIndexSubject(participant, to)];
  } else {
    subjects = [pairIndexSubject(participant, "*"), pairIndexSubject("*", participant)];
  }
  return subjects.map((subject) => ({ stream: LEGACY_INDEX_STREAM, subject, side: "pair" }));
}

/** Next entry across the scanners in stream order, with whether its walk, kind and method keep it. */
async function nextEntry(
  scanners: SubjectScanner[],
  query: ListQuery,
): Promise<{ scanned: Scanned; candidate: boolean } | null> {
  const heads = await Promise.all(scanners.map((scanner) => scanner.peek()));
  let best = -1;
  heads.forEach((head, index) => {
    if (head && (best < 0 || head.seq < (heads[best] as Scanned).seq)) best = index;
  });
  const scanner = scanners[best];
  const scanned = heads[best];
  if (!scanner || !scanned) return null;
  // A legacy entry of a message to itself matches both pair wildcards: taken from both at once.
  heads.forEach((head, index) => {
    if (head && head.seq === scanned.seq) scanners[index]?.take();
  });
  const { kind, method } = scanned.entry;
  const candidate =
    scanner.keeps(scanned) &&
    (query.kind === undefined || kind === query.kind) &&
    (query.method === undefined || method === query.method);
  return { scanned, candidate };
}

/** The legacy stream's entries first, then the shard's: one walk from a position. */
class Listing {
  private readonly legacyScanners: SubjectScanner[];
  private readonly shardScanners: SubjectScanner[];

  constructor(
    jsm: JetStreamManager,
    legacy: LegacyIndex,
    private readonly query: ListQuery,
    readonly at: Position,
  ) {
    const from = (walks: Walk[], after: number) =>
      walks.map((walk) => new SubjectScanner(jsm, walk, after + 1, legacy));
    this.legacyScanners = at.legacy === null ? [] : from(pairWalks(query), at.legacy);
    this.shardScanners = from(participantWalks(query), at.shard);
  }

  /** The next entry, and the position once it is taken. */
  async next(): Promise<{ scanned: Scanned; candidate: boolean; at: Position } | null> {
    if (this.at.legacy !== null) {
      const next = await nextEntry(this.legacyScanners, this.query);
      if (next) return { ...next, at: { ...this.at, legacy: next.scanned.seq } };
    }
    const next = await nextEntry(this.shardScanners, this.query);
    return next && { ...next, at: { legacy: null, shard: next.scanned.seq } };
  }
}

/**
 * Whether `list` shows the message at this entry: the record names the entries it counts, so a
 * second entry for the same message (a resubmission's) is skipped. A record naming only
 * `indexSeq` was written by a broker made before the shards: that is a legacy entry's sequence
 * (sequences of different streams are not comparable), and the message is shown from there.
 */
function countsEntry(doc: StatusDoc, scanned: Scanned): boolean {
  if (doc.indexSeq === undefined) return true; // written by the recipient's inbox: names none
  const legacy = doc.receivedIndexSeq === undefined;
  if (scanned.side === "pair") return legacy && doc.indexSeq === scanned.seq;
  if (legacy) return false;
  return (scanned.side === "sent" ? doc.indexSeq : doc.receivedIndexSeq) === scanned.seq;
}

function recordOf(
  scanned: Scanned,
  doc: StatusDoc | null,
  policy: BrokerPolicy,
  now: number,
): MessageRecord | null {
  if (doc && !countsEntry(doc, scanned)) return null;
  // No status record: the submit stopped between publish and record; the message is still queued.
  return buildRecord(doc ?? { ...scanned.entry, status: "queued", attempts: 0 }, policy, now);
}

export async function listMessages(
  jsm: JetStreamManager,
  statuses: StatusStore,
  legacy: LegacyIndex,
  policy: BrokerPolicy,
  query: ListQuery,
  limit: number,
): Promise<ListPage> {
  const start = decodeListCursor(query.cursor);
  if (start.legacy !== null && !(await legacy.present())) start.legacy = null;
  const listing = new Listing(jsm, legacy, query, start);
  const items: MessageRecord[] = [];
  let at = start;
  let exhausted = false;
  while (items.length < limit && !exhausted) {
    // Gather a batch of candidates, then read their status records concurrently.
    const batch: Scanned[] = [];
    while (batch.length < limit - items.length) {
      const next = await listing.next();
      if (!next) {
        exhausted = true;
        break;
      }
      if (next.candidate) batch.push(next.scanned);
      at = next.at;
    }
    const docs = await Promise.all(batch.map((scanned) => statuses.read(scanned.entry)));
    const now = Date.now();
    batch.forEach((scanned, index) => {
      const record = recordOf(scanned, docs[index]?.value ?? null, policy, now);
      if (record && (query.status === undefined || record.status === query.status)) items.push(record);
    });
  }
  return { items, nextCursor: !exhausted && (await anotherCandidate(listing)) ? encodeListCursor(at) : null };
}

/** Whether a candidate follows: the next page has something to look at. */
async function anotherCandidate(listing: Listing): Promise<boolean> {
  for (;;) {
    const next = await listing.next();
    if (!next || next.candidate) return next !== null;
  }
}

/** Opaque to callers: `c2:<legacy entry or x>:<shard entry>`. */
function encodeListCursor(at: Position): string {
  return Buffer.from(`c2:${at.legacy ?? "x"}:${at.shard}`, "utf8").toString("base64url");
}

/** A cursor of this broker, or of one made before the shards (`c1:<legacy entry>`). */
function decodeListCursor(cursor: string | undefined): Position {
  if (cursor === undefined) return { legacy: 0, shard: 0 };
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const match = /^c2:(x|\d{1,15}):(\d{1,15})$/.exec(text);
  if (match?.[1] && match[2])
    return { legacy: match[1] === "x" ? null : Number(match[1]), shard: Number(match[2]) };
  const earlier = /^c1:(\d{1,15})$/.exec(text);
  if (earlier?.[1]) return { legacy: Number(earlier[1]), shard: 0 };
  throw new BrokerError("invalid_argument", "list: cursor is not one returned by list()", {
    field: "cursor",
  });
}
