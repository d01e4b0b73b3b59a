/**
 * Quota usage shared by every gateway on one NATS: KV bucket `acp_usage`, one record per agent.
 * A record holds, per time slot of the messages' queue time, what the agent has pending as a
 * recipient (messages, bytes) and stored as a sender (bytes). A submit adds to its slot, a
 * settlement (ack, reject, dead letter) subtracts from the slot its message was queued in, and a
 * slot whose messages are all past retention stops counting: expiry needs no write and no sweep,
 * and a record never written again is removed by the bucket's own max age.
 *
 * The hot path makes no round trip: each gateway follows the bucket (a KV watch), so it knows
 * every record as last written, and adds what it accepted or settled itself and has not written
 * yet. Its own changes are written in the background, one compare-and-set per agent per flush
 * (every second while there are any), retried on a conflict with another gateway's write. So the
 * limits hold across gateways to within what the others accepted in the last second (a flush and
 * a watch delivery), and the write cost does not grow with the message rate. What a gateway that
 * dies had not written yet is lost: at most a second of its changes, which stop counting, like
 * everything else, when their slot ends (retention plus one slot).
 *
 * A write whose answer is lost (a timeout) may still land. So each record names, per gateway, the
 * sequence number of that gateway's last write into it: a batch of changes is counted from the
 * record once the record carries its number, and until then is counted, and written again, by
 * the gateway that made it. The compare-and-set makes the two exclusive: a batch is in the record
 * exactly once, whether its first write landed late or never.
 */
import { type KV, type Kvm, KvWatchInclude } from "@nats-io/kv";
import { isBrokerError } from "../errors.js";
import type { BrokerPolicy, Warn } from "../policy.js";
import { checkQuotas, envelopeBytes, NO_USAGE, type ResolvedQuotas } from "../quotas.js";
import type { AgentUsage, SubmitInput, SubmitResult } from "../types.js";
import { bucketOptions, USAGE_BUCKET } from "./layout.js";
import { isRevisionConflict } from "./status-store.js";

/** Per slot: [pending messages, pending bytes, stored bytes]. */
type Counts = [number, number, number];
/** Slot number → counts. */
type Slots = Map<number, Counts>;
/** The record as stored: slot number (as text) → counts, and each writer's last write. */
interface UsageRecord {
  slots: Record<string, Counts>;
  /** Gateway instance → [sequence number of its last write into this record, when (ms)]. */
  writers?: Record<string, [number, number]>;
}
/** Changes this gateway made, written under `seq` (not yet known to be in the record). */
interface Batch {
  seq: number;
  changes: Slots;
}

/**
 * How often this gateway writes the changes it made. Each agent changed in that time costs one
 * write, so with many agents sending a message now and then this is what bounds the writes (at
 * most one per agent per second); the quotas are large, so one second of other gateways' traffic
 * over a limit is nothing next to it.
 */
const FLUSH_MS = 1_000;
const MAX_CAS_ATTEMPTS = 10;
/** Slots per retention period: expiry is seen at most retention/48 late (3.5 h of 7 days). */
const SLOTS_PER_RETENTION = 48;
/** How long `open` waits for the watch to deliver the records already there. */
const LOAD_TIMEOUT_MS = 10_000;
/**
 * A writer not heard of for this long is dropped from a record's `writers`: far longer than any
 * gateway keeps retrying a batch (it retries every second), so no batch is counted twice.
 */
const WRITER_MEMORY_MS = 24 * 60 * 60 * 1_000;

export class UsageLedger {
  /** Each agent's record as last written (by anyone), with its revision. */
  readonly #shared = new Map<string, { slots: Slots; revision: number; writers?: UsageRecord["writers"] }>();
  /** Per agent, this gateway's batches written (or being written) but not yet seen in the record. */
  readonly #written = new Map<string, Batch[]>();
  /** This gateway's changes not written yet. */
  readonly #unwritten = new Map<string, Slots>();
  /** Names this gateway in the records' `writers`. */
  readonly #instance = `${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  #writes = 0;
  readonly #slotMs: number;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  #stop: (() => void) | undefined;
  #failing = false;
  #closed = false;

  private constructor(
    private readonly kv: KV,
    private readonly quotas: ResolvedQuotas,
    private readonly policy: BrokerPolicy,
    private readonly warn: Warn,
  ) {
    this.#slotMs = Math.max(1_000, Math.ceil(policy.retentionMs / SLOTS_PER_RETENTION));
  }

  static async open(
    kvm: Kvm,
    replicas: number,
    quotas: ResolvedQuotas,
    policy: BrokerPolicy,
    warn: Warn,
  ): Promise<UsageLedger> {
    const { republish: _noChangeFeed, ...options } = bucketOptions(USAGE_BUCKET, replicas);
    // A record nobody wrote for this long holds only slots past retention.
    const slotMs = Math.max(1_000, Math.ceil(policy.retentionMs / SLOTS_PER_RETENTION));
    const kv = await kvm.create(USAGE_BUCKET, { ...options, ttl: policy.retentionMs + 2 * slotMs });
    const ledger = new UsageLedger(kv, quotas, policy, warn);
    await ledger.#follow();
    return ledger;
  }

  /** What `agentId` uses now: every gateway's record plus this one's changes not written yet. */
  usage(agentId: string, now = Date.now()): AgentUsage {
    const usage = { ...NO_USAGE };
    const oldest = this.#oldestLiveSlot(now);
    const sources = [
      this.#shared.get(agentId)?.slots,
      ...(this.#written.get(agentId) ?? []).map((batch) => batch.changes),
      this.#unwritten.get(agentId),
    ];
    for (const slots of sources) {
      if (!slots) continue;
      for (const [slot, [messages, bytes, stored]] of slots) {
        if (slot < oldest) continue;
        usage.pendingMessages += messages;
        usage.pendingBytes += bytes;
        usage.storedBytes += stored;
      }
    }
    usage.pendingMessages = Math.max(0, usage.pendingMessages);
    usage.pendingBytes = Math.max(0, usage.pendingBytes);
    usage.storedBytes = Math.max(0, usage.storedBytes);
    return usage;
  }

  /**
   * Stores a submission queued at `queuedAt` with `store` (given the bytes to record on its status
   * record), counted first, or refuses it past a quota (BrokerError `quota`, nothing stored). A
   * resubmission of a stored message (`isStored`) stores nothing, so it is never refused.
   */
  async submit(
    input: SubmitInput,
    queuedAt: number,
    isStored: () => Promise<boolean>,
    store: (usageBytes: number | undefined) => Promise<SubmitResult>,
  ): Promise<SubmitResult> {
    const bytes = envelopeBytes(input.envelope);
    try {
      checkQuotas(this.quotas, input.to, this.usage(input.to), input.from, this.usage(input.from), bytes);
    } catch (error) {
      if (isBrokerError(error, "quota") && (await isStored())) return store(undefined);
      throw error;
    }
    this.#change(input.to, queuedAt, [1, bytes, 0]);
    this.#change(input.from, queuedAt, [0, 0, bytes]);
    const uncount = () => {
      this.#change(input.to, queuedAt, [-1, -bytes, 0]);
      this.#change(input.from, queuedAt, [0, 0, -bytes]);
    };
    try {
      const result = await store(bytes);
      if (result.duplicate) uncount();
      return result;
    } catch (error) {
      uncount();
      throw error;
    }
  }

  /** A message to `to` queued at `queuedAt` was acknowledged, rejected or dead-lettered. */
  settled(to: string, bytes: number, queuedAt: number): void {
    this.#change(to, queuedAt, [-1, -bytes, 0]);
  }

  /** Writes what is left and stops following the bucket. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flush();
    this.#stop?.();
  }

  #oldestLiveSlot(now: number): number {
    // Slot s holds messages queued in [s, s+1) slots; all of them are past retention once
    // now >= (s + 1) * slotMs + retention.
    return Math.floor((now - this.policy.retentionMs) / this.#slotMs);
  }

  #change(agentId: string, queuedAt: number, counts: Counts): void {
    const slots = this.#unwritten.get(agentId) ?? new Map<number, Counts>();
    addInto(slots, Math.floor(queuedAt / this.#slotMs), counts);
    this.#unwritten.set(agentId, slots);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.#flush();
    }, FLUSH_MS);
  }

  /** Writes every agent's unwritten changes; one flush at a time. */
  #flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      const agents = new Set([...this.#unwritten.keys(), ...this.#written.keys()]);
      await Promise.all([...agents].map((agentId) => this.#write(agentId)));
      if (this.#unwritten.size > 0 || this.#written.size > 0) this.#schedule();
    });
    return this.#flushing;
  }

  /** Writes `agentId`'s unwritten changes, and any earlier batch not yet seen in its record. */
  async #write(agentId: string): Promise<void> {
    const changes = this.#unwritten.get(agentId);
    this.#unwritten.delete(agentId);
    const batches = this.#written.get(agentId) ?? [];
    if (changes) batches.push({ seq: ++this.#writes, changes });
    if (batches.length === 0) return;
    this.#written.set(agentId, batches);
    try {
      for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
        const pending = this.#written.get(agentId);
        if (!pending) return; // the watch showed every batch in the record meanwhile
        const known = this.#shared.get(agentId);
        const now = Date.now();
        const next: Slots = new Map(
          [...(known?.slots ?? [])].map(([slot, counts]) => [slot, [...counts] as Counts]),
        );
        for (const batch of pending) for (const [slot, counts] of batch.changes) addInto(next, slot, counts);
        const oldest = this.#oldestLiveSlot(now);
        for (const [slot, counts] of next)
          if (slot < oldest || counts.every((n) => n === 0)) next.delete(slot);
        const writers = Object.fromEntries(
          Object.entries(known?.writers ?? {}).filter(([, [, at]]) => at > now - WRITER_MEMORY_MS),
        );
        writers[this.#instance] = [(pending.at(-1) as Batch).seq, now];
        const record: UsageRecord = { slots: Object.fromEntries(next), writers };
        const text = JSON.stringify(record);
        try {
          const revision = known
            ? await this.kv.update(agentId, text, known.revision)
            : await this.kv.create(agentId, text);
          this.#learn(agentId, record, revision);
          this.#failing = false;
          return;
        } catch (error) {
          if (!isRevisionConflict(error)) throw error;
          await this.#reread(agentId);
        }
      }
      throw new Error(`the usage record of ${agentId} kept changing`);
    } catch (error) {
      // The write may have landed though its answer did not come: the record then carries its
      // number, and the batches stop counting here. Otherwise they are written at the next flush.
      await this.#reread(agentId).catch(() => undefined);
      if (!this.#written.has(agentId)) return;
      if (!this.#failing) this.warn(`quota usage not written yet, will retry: ${String(error)}`);
      this.#failing = true;
    }
  }

  /** Reads `agentId`'s record as it is now. */
  async #reread(agentId: string): Promise<void> {
    const entry = await this.kv.get(agentId);
    if (entry?.operation === "PUT") this.#learn(agentId, entry.json<UsageRecord>(), entry.revision);
    else this.#shared.delete(agentId);
  }

  /**
   * A record as written by anyone; newer revisions replace older ones. This gateway's batches up
   * to the sequence number the record names for it are in the record now, and stop counting here.
   */
  #learn(agentId: string, record: UsageRecord, revision: number): void {
    const known = this.#shared.get(agentId);
    if (!known || revision > known.revision)
      this.#shared.set(agentId, { slots: parseSlots(record), revision, writers: record.writers });
    const seen = record.writers?.[this.#instance]?.[0];
    const batches = this.#written.get(agentId);
    if (seen === undefined || !batches) return;
    const left = batches.filter((batch) => batch.seq > seen);
    if (left.length > 0) this.#written.set(agentId, left);
    else this.#written.delete(agentId);
  }

  /** Follows the bucket: first every record already there, then each write as it happens. */
  async #follow(): Promise<void> {
    const expected = (await this.kv.status()).values;
    const watcher = await this.kv.watch({ include: KvWatchInclude.LastValue });
    this.#stop = () => watcher.stop();
    let loaded: () => void = () => undefined;
    const initial = new Promise<void>((resolve) => {
      loaded = resolve;
    });
    if (expected === 0) loaded();
    void (async () => {
      for await (const entry of watcher) {
        if (entry.operation === "PUT") {
          try {
            this.#learn(entry.key, entry.json<UsageRecord>(), entry.revision);
          } catch {
            this.warn(`quota usage record ${entry.key} is not readable; ignored`);
          }
        } else {
          this.#shared.delete(entry.key);
        }
        if (entry.isUpdate) loaded();
      }
    })();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.warn("quota usage: the records already stored took too long to load; going on");
        resolve();
      }, LOAD_TIMEOUT_MS);
    });
    await Promise.race([initial, timeout]);
    clearTimeout(timer);
  }
}

function addInto(slots: Slots, slot: number, [messages, bytes, stored]: Counts): void {
  const counts = slots.get(slot);
  if (counts) {
    counts[0] += messages;
    counts[1] += bytes;
    counts[2] += stored;
  } else {
    slots.set(slot, [messages, bytes, stored]);
  }
}

function parseSlots(record: UsageRecord): Slots {
  const slots: Slots = new Map();
  for (const [slot, counts] of Object.entries(record.slots ?? {})) {
    if (Array.isArray(counts) && counts.length === 3) slots.set(Number(slot), [...counts] as Counts);
  }
  return slots;
}
