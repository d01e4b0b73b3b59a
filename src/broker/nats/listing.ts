import type { JetStreamManager } from "@nats-io/jetstream";
import type { BrokerPolicy } from "../policy.js";
import { buildRecord } from "../records.js";
import type { MessageType } from "../../protocol/schemas.js";
import type { ListPage, ListQuery, MessageRecord } from "../types.js";
import { encodeCursor } from "../validation.js";
import { INDEX_STREAM, indexSubject } from "./layout.js";
import type { StatusDoc, StatusStore } from "./status-store.js";

/** An ACP_INDEX entry: its payload, and the sender and recipient its subject names. */
export interface IndexEntry {
  id: string;
  from: string;
  to: string;
  kind: MessageType;
  method: string;
  submittedAt: string;
  queuedAt: number;
}

/** An entry's payload: the sender and recipient are in its subject (entries written before also carry them). */
export function indexPayload(entry: IndexEntry): string {
  const { from: _from, to: _to, ...payload } = entry;
  return JSON.stringify(payload);
}

/** The entry stored on `acp.index.<from>.<to>`. */
function indexEntryOf(subject: string, payload: Omit<IndexEntry, "from" | "to">): IndexEntry {
  const [, , from = "", to = ""] = subject.split(".");
  return { ...payload, from, to };
}

interface Scanned {
  seq: number;
  entry: IndexEntry;
}

/** Walks one index subject forward with direct gets ("next message on this subject from seq"). */
class SubjectScanner {
  private head: Scanned | null | undefined;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly subject: string,
    private nextSeq: number,
  ) {}

  async peek(): Promise<Scanned | null> {
    if (this.head === undefined) {
      const msg = await this.jsm.direct.getMessage(INDEX_STREAM, {
        seq: this.nextSeq,
        next_by_subj: this.subject,
      });
      this.head = msg ? { seq: msg.seq, entry: indexEntryOf(msg.subject, msg.json<IndexEntry>()) } : null;
    }
    return this.head;
  }

  take(): void {
    if (this.head) this.nextSeq = this.head.seq + 1;
    this.head = undefined;
  }
}

/** The index subjects holding every message `query.participant` may see, narrowed by from/to. */
function subjectsFor(query: ListQuery): string[] {
  const { participant, from, to } = query;
  if (from !== undefined && to !== undefined) {
    return participant === from || participant === to ? [indexSubject(from, to)] : [];
  }
  if (from !== undefined)
    return [from === participant ? indexSubject(from, "*") : indexSubject(from, participant)];
  if (to !== undefined) return [to === participant ? indexSubject("*", to) : indexSubject(participant, to)];
  return [indexSubject(participant, "*"), indexSubject("*", participant)];
}

/** Next entry across all scanners in stream order; an entry seen by two scanners (P→P) counts once. */
async function nextEntry(scanners: SubjectScanner[]): Promise<Scanned | null> {
  const heads = await Promise.all(scanners.map((scanner) => scanner.peek()));
  let best: Scanned | null = null;
  for (const head of heads) if (head && (!best || head.seq < best.seq)) best = head;
  if (!best) return null;
  heads.forEach((head, index) => {
    if (head && head.seq === best.seq) scanners[index]?.take();
  });
  return best;
}

function recordOf(
  scanned: Scanned,
  doc: StatusDoc | null,
  policy: BrokerPolicy,
  now: number,
): MessageRecord | null {
  // A second index entry for the same id (a duplicate submitted after the dedup window) is skipped.
  if (doc?.indexSeq !== undefined && doc.indexSeq !== scanned.seq) return null;
  // No status record: the submit stopped between publish and record; the message is still queued.
  return buildRecord(doc ?? { ...scanned.entry, status: "queued", attempts: 0 }, policy, now);
}

export async function listMessages(
  jsm: JetStreamManager,
  statuses: StatusStore,
  policy: BrokerPolicy,
  query: ListQuery,
  afterSeq: number,
  limit: number,
): Promise<ListPage> {
  const scanners = subjectsFor(query).map((subject) => new SubjectScanner(jsm, subject, afterSeq + 1));
  const items: MessageRecord[] = [];
  let lastSeq = afterSeq;
  let exhausted = false;
  while (items.length < limit && !exhausted) {
    // Gather a batch of candidates, then read their status records concurrently.
    const batch: Scanned[] = [];
    while (batch.length < limit - items.length) {
      const scanned = await nextEntry(scanners);
      if (!scanned) {
        exhausted = true;
        break;
      }
      const { kind, method } = scanned.entry;
      if (
        (query.kind === undefined || kind === query.kind) &&
        (query.method === undefined || method === query.method)
      ) {
        batch.push(scanned);
      }
      lastSeq = scanned.seq;
    }
    const docs = await Promise.all(batch.map((scanned) => statuses.read(scanned.entry)));
    const now = Date.now();
    batch.forEach((scanned, index) => {
      const record = recordOf(scanned, docs[index]?.value ?? null, policy, now);
      if (record && (query.status === undefined || record.status === query.status)) items.push(record);
    });
  }
  const more = !exhausted && (await nextEntry(scanners)) !== null;
  return { items, nextCursor: more ? encodeCursor(lastSeq) : null };
}
