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
/** The record as stored: slot number (as text) → counts, and which write of which gateway it is. */
interface UsageRecord {
  slots: Record<string, Counts>;
  write?: string;
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

export class UsageLedger {
  /** Each agent's record as last written (by anyone), with its revision. */
  readonly #shared = new Map<string, { slots: Slots; revision: number }>();
  /** This gateway's changes being written now (with the write's tag), and those not written yet. */
  readonly #writing = new Map<string, { changes: Slots; tag: string }>();
  readonly #unwritten = new Map<string, Slots>();
  /** Tags this gateway's writes, so the watch tells when one is in the record it delivers. */
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
      this.#writing.get(agentId)?.changes,
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
      const agents = [...this.#unwritten.keys()];
      await Promise.all(agents.map((agentId) => this.#write(agentId)));
      if (this.#unwritten.size > 0) this.#schedule();
    });
    return this.#flushing;
  }

  async #write(agentId: string): Promise<void> {
    const changes = this.#unwritten.get(agentId);
    if (!changes) return;
    this.#unwritten.delete(agentId);
    const writing = { changes, tag: `${this.#instance}-${++this.#writes}` };
    this.#writing.set(agentId, writing);
    try {
      for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
        const known = this.#shared.get(agentId);
        const next: Slots = new Map(
          [...(known?.slots ?? [])].map(([slot, counts]) => [slot, [...counts] as Counts]),
        );
        for (const [slot, counts] of changes) addInto(next, slot, counts);
        const oldest = this.#oldestLiveSlot(Date.now());
        for (const [slot, counts] of next)
          if (slot < oldest || counts.every((n) => n === 0)) next.delete(slot);
        const record: UsageRecord = { slots: Object.fromEntries(next), write: writing.tag };
        const text = JSON.stringify(record);
        try {
          const revision = known
            ? await this.kv.update(agentId, text, known.revision)
            : await this.kv.create(agentId, text);
          this.#learn(agentId, next, revision, writing.tag);
          this.#failing = false;
          return;
        } catch (error) {
          if (!isRevisionConflict(error)) throw error;
          const entry = await this.kv.get(agentId);
          if (entry?.operation === "PUT") {
            const stored = entry.json<UsageRecord>();
            this.#learn(agentId, parseSlots(stored), entry.revision, stored.write);
          } else this.#shared.delete(agentId);
        }
      }
      throw new Error(`the usage record of ${agentId} kept changing`);
    } catch (error) {
      // The write may have landed though its answer did not come: then the record carries its tag.
      if (await this.#landed(agentId, writing.tag)) return;
      // Kept for the next flush (NATS unreachable, or a long race): nothing is lost meanwhile.
      const later = this.#unwritten.get(agentId) ?? new Map<number, Counts>();
      for (const [slot, counts] of changes) addInto(later, slot, counts);
      this.#unwritten.set(agentId, later);
      if (!this.#failing) this.warn(`quota usage not written yet, will retry: ${String(error)}`);
      this.#failing = true;
    } finally {
      if (this.#writing.get(agentId) === writing) this.#writing.delete(agentId);
    }
  }

  async #landed(agentId: string, tag: string): Promise<boolean> {
    try {
      const entry = await this.kv.get(agentId);
      if (entry?.operation !== "PUT") return false;
      const stored = entry.json<UsageRecord>();
      if (stored.write !== tag) return false;
      this.#learn(agentId, parseSlots(stored), entry.revision, stored.write);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * A record as written by anyone; newer revisions replace older ones. When it is this gateway's
   * write under way (the watch can deliver it before the write's answer), the changes it carries
   * are in the record now and stop counting on their own.
   */
  #learn(agentId: string, slots: Slots, revision: number, write?: string): void {
    const known = this.#shared.get(agentId);
    if (known && revision <= known.revision) return;
    this.#shared.set(agentId, { slots, revision });
    if (write !== undefined && this.#writing.get(agentId)?.tag === write) this.#writing.delete(agentId);
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
            const stored = entry.json<UsageRecord>();
            this.#learn(entry.key, parseSlots(stored), entry.revision, stored.write);
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
