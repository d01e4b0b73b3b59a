import { JetStreamApiError } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { headers } from "@nats-io/transport-node";
import { BrokerError } from "../errors.js";
import type { StatusFields } from "../records.js";
import { SerialByKey } from "../serial-by-key.js";
import type { MessageRef } from "../types.js";
import { messageKey, refKey } from "../validation.js";
import { STATUS_BUCKET } from "./layout.js";
import type { StreamPublisher } from "./publisher.js";

/** The status record kept per message (sender and id: MessageRef) in the `acp_message_status` KV bucket. */
export interface StatusDoc extends StatusFields {
  /** Sequence of the message in ACP_INBOX: a copy with another sequence is a late duplicate. */
  seq: number;
  /** Sequence of its sender's ACP_INDEX entry (by pair, if written before those), when known. */
  indexSeq?: number;
  /** Sequence of its recipient's ACP_INDEX entry, when known. */
  receivedIndexSeq?: number;
  /** Reply subject of the hand-out now out: any gateway can ack or term through it. */
  ackSubject?: string;
  /**
   * The envelope's bytes, present when the quota usage counted the message (usage-ledger.ts): its
   * settlement then takes it back out of its recipient's pending usage.
   */
  usageBytes?: number;
  /** The broker instance that made the hand-out now out (its gateway's sockets received it). */
  holder?: string;
  /** Where an answer to this message goes (`SubmitInput.replyTo`). */
  replyTo?: string;
  /** The route it is to be delivered through (`SubmitInput.route`), until that route gives it up. */
  route?: string;
}

/**
 * The record as stored. Its key already says the sender and the id, and once the message is
 * settled nothing reads what only a hand-out still out needs (its ack subject, holder and due
 * time; the settlement takes the ack subject from the record in hand): a week of records is
 * a third of the store, and the two a message's record replaces stay on disk beside it
 * (docs/performance.md, "A week-old store", Disk).
 */
export function storedForm(doc: StatusDoc): string {
  const { id: _id, from: _from, ...fields } = doc;
  if (doc.status === "acknowledged" || doc.status === "failed") {
    const { ackSubject: _ackSubject, holder: _holder, dueAt: _dueAt, ...settled } = fields;
    return JSON.stringify(settled);
  }
  return JSON.stringify(fields);
}

/** A stored record read back under its key's sender and id (records written before `storedForm` also carry them). */
export function fromStored(stored: Omit<StatusDoc, "id" | "from">, message: MessageRef): StatusDoc {
  return { ...stored, id: message.id, from: message.from };
}

/** The record of a hand-out given back uncounted: as if that delivery had never been made. */
export function uncounted(doc: StatusDoc): StatusDoc {
  return { ...doc, attempts: doc.attempts - 1, dueAt: undefined, ackSubject: undefined, holder: undefined };
}

export interface Versioned<T> {
  value: T;
  revision: number;
}

/** What a mutation decided: write `next` (or nothing) and hand `result` back to the caller. */
export interface Decision<R> {
  next?: StatusDoc;
  result: R;
}

const MAX_CAS_ATTEMPTS = 20;

/** Compare-and-set lost a race ("wrong last sequence"): someone else wrote the key first. */
export function isRevisionConflict(error: unknown): boolean {
  return error instanceof JetStreamApiError && (error.code === 10071 || error.code === 10164);
}

/** Records this process wrote last, kept to skip a read before the next compare-and-set. */
const CACHE_LIMIT = 10_000;

/**
 * Status records with compare-and-set updates, so gateways writing the same message never lose a
 * change. Within this process the writes to one record run one after another (`lock`), and the
 * record written last is remembered: the next update (queued → delivered → acknowledged) uses
 * that revision without reading first. If another gateway changed it meanwhile the write is
 * refused and the store reads and decides again. Decisions that write nothing only ever rest on
 * fields that never change (sequence, recipient, queue time) or on settled states.
 *
 * Writes are KV puts published directly (subject `$KV.<bucket>.<key>` with the expected revision
 * in `Nats-Expected-Last-Subject-Sequence`, as the KV client does) through the broker's
 * StreamPublisher; reads go through the KV client.
 */
export class StatusStore {
  private readonly recent = new Map<string, Versioned<StatusDoc>>();
  private readonly locks = new SerialByKey();

  constructor(
    private readonly kv: KV,
    private readonly publisher: StreamPublisher,
  ) {}

  /** The next decision on `message` reads the record again (another instance is expected to change it). */
  forget(message: MessageRef): void {
    this.recent.delete(refKey(message));
  }

  /** The record as this process wrote it last, if it is still unsettled here; else as stored. */
  async recentOrRead(message: MessageRef): Promise<StatusDoc | null> {
    return this.recent.get(refKey(message))?.value ?? (await this.read(message))?.value ?? null;
  }

  async read(message: MessageRef): Promise<Versioned<StatusDoc> | null> {
    const entry = await this.kv.get(messageKey(message));
    if (entry?.operation !== "PUT") return null;
    return { value: fromStored(entry.json<StatusDoc>(), message), revision: entry.revision };
  }

  /**
   * Up to two senders of a message to `recipient` with this id, those whose message still waits
   * first (Broker.sendersTo). The bucket is keyed by sender, so the server filters its keys on the
   * id's token (`*.<id>`): one key per sender that used the id.
   */
  async sendersTo(recipient: string, id: string): Promise<string[]> {
    const waiting: string[] = [];
    const settled: string[] = [];
    for await (const key of await this.kv.keys(messageKey({ from: "*", id }))) {
      const from = key.slice(0, key.indexOf("."));
      const doc = (await this.read({ from, id }))?.value;
      if (doc?.to !== recipient) continue;
      (doc.status === "queued" || doc.status === "delivered" ? waiting : settled).push(from);
      if (waiting.length === 2) break;
    }
    return (waiting.length > 0 ? waiting : settled).slice(0, 2);
  }

  /** Creates the record; false if one exists already. */
  async create(doc: StatusDoc): Promise<boolean> {
    try {
      this.remember(doc, await this.write(doc, 0));
      return true;
    } catch (error) {
      if (isRevisionConflict(error)) return false;
      throw error;
    }
  }

  /**
   * Runs `work` after the locked work already started on `message` in this process, and before any
   * started later. `work` begins synchronously when nothing is waiting, so publishes it makes
   * right away keep the caller's order. `work` must not call `mutate` for the same message.
   */
  lock<R>(message: MessageRef, work: () => Promise<R>): Promise<R> {
    return this.locks.run(refKey(message), work);
  }

  /**
   * Names the message's index entries in a record that names none (one the recipient's inbox wrote
   * first). Under the caller's `lock` for the message (the submit's).
   */
  setIndexEntries(
    message: MessageRef,
    entries: Required<Pick<StatusDoc, "indexSeq" | "receivedIndexSeq">>,
  ): Promise<void> {
    return this.mutateNow(message, (current) =>
      current && current.value.indexSeq === undefined
        ? { next: { ...current.value, ...entries }, result: undefined }
        : { result: undefined },
    );
  }

  /** Decides on the current record, writes with compare-and-set; on a lost race reads and decides again. */
  mutate<R>(message: MessageRef, decide: (current: Versioned<StatusDoc> | null) => Decision<R>): Promise<R> {
    return this.lock(message, () => this.mutateNow(message, decide));
  }

  private async mutateNow<R>(
    message: MessageRef,
    decide: (current: Versioned<StatusDoc> | null) => Decision<R>,
  ): Promise<R> {
    const key = refKey(message);
    let current: Versioned<StatusDoc> | null | undefined = this.recent.get(key);
    let cached = current !== undefined;
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      if (current === undefined) {
        current = await this.read(message);
        cached = false;
      }
      let decision: Decision<R>;
      try {
        decision = decide(current);
      } catch (error) {
        // Refused on the copy this process wrote last: another instance may have moved the record
        // on since (delivered it, say), so decide again on what is stored.
        if (!cached) throw error;
        this.recent.delete(key);
        current = undefined;
        continue;
      }
      const { next, result } = decision;
      if (!next) return result;
      try {
        this.remember(next, await this.write(next, current?.revision ?? 0));
        return result;
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
        this.recent.delete(key);
        current = undefined;
      }
    }
    throw new BrokerError(
      "unavailable",
      `status of message ${message.id} keeps changing; gave up after ${MAX_CAS_ATTEMPTS} tries`,
    );
  }

  /** Writes if the key is at `expectedRevision` (0: does not exist); returns the new revision. */
  private async write(doc: StatusDoc, expectedRevision: number): Promise<number> {
    const h = headers();
    h.set("Nats-Expected-Last-Subject-Sequence", String(expectedRevision));
    const ack = await this.publisher.publish(`$KV.${STATUS_BUCKET}.${messageKey(doc)}`, storedForm(doc), h);
    return ack.seq;
  }

  private remember(doc: StatusDoc, revision: number): void {
    const key = refKey(doc);
    this.recent.delete(key);
    if (doc.status === "acknowledged" || doc.status === "failed") return;
    this.recent.set(key, { value: doc, revision });
    if (this.recent.size > CACHE_LIMIT) {
      const oldest = this.recent.keys().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
  }
}
