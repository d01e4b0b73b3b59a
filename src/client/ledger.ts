import { type HandledEntry, HandledLog } from "./handled-log.js";
import type { HandledRecord, HandledStore } from "./handled-store.js";

export interface LedgerSettings {
  /** How long a handled id is kept: the replay window, past which a redelivery is refused as stale anyway. */
  retentionMs: number;
  /** At most this many handled ids are kept (the oldest are forgotten first). Default 100 000. */
  capacity?: number;
  /** Persist handled ids under this state root (`<root>/<agent-id>/handled.log`); absent: memory only. */
  persist?: { root: string; agentId: string };
  /** The application's store of handled messages: replaces the file, and is asked about every new id. */
  store?: HandledStore;
}

/**
 * Exactly-once for the application on top of the gateway's at-least-once delivery. Every delivery
 * id the agent has started is remembered: a redelivery of one still being processed is ignored (the
 * running processing acknowledges it), a redelivery of a finished one is only acknowledged.
 *
 * Finished ids are kept for `retentionMs` (the replay window: an older message fails the timestamp
 * check before the handler could see it) and at most `capacity` of them, far more than the gateway
 * ever redelivers. They are also recorded durably — in the application's HandledStore, or else in
 * `handled.log` under a state root — before the ack goes out, so an agent restarted after its
 * handler ran but before the gateway saw the ack still recognises the redelivery. A request's signed
 * response is recorded before it is submitted: a redelivery sends that response again rather than
 * running the handler again. Without a store, the record follows the handler's effect: a crash
 * between the two (microseconds) runs the handler again, never loses the message.
 */
export class DeliveryLedger {
  private readonly processing = new Set<string>();
  /** Finished id → when it may be forgotten; insertion order is expiry order (fixed retention). */
  private readonly done = new Map<string, number>();
  /** Requests handled whose signed response the gateway has not accepted yet. */
  private readonly responses = new Map<string, HandledEntry>();
  /** Response records still reaching the disk, awaited with their id's finish. */
  private readonly writing = new Map<string, Promise<void>>();
  private readonly capacity: number;
  private readonly log: HandledLog | undefined;
  private readonly store: HandledStore | undefined;

  constructor(private readonly settings: LedgerSettings) {
    this.capacity = settings.capacity ?? 100_000;
    this.store = settings.store;
    this.log =
      settings.persist && !settings.store
        ? new HandledLog(
            settings.persist.root,
            settings.persist.agentId,
            {
              count: () => this.done.size + this.responses.size,
              entries: () => this.entries(),
            },
            { capacity: this.capacity },
          )
        : undefined;
  }

  /** Where handled ids are persisted (undefined: memory only, or the application's store). */
  get file(): string | undefined {
    return this.log?.file;
  }

  /** Loads the ids handled by earlier runs. */
  async open(): Promise<void> {
    if (!this.log) return;
    for (const [id, entry] of await this.log.load()) {
      if (entry.response) this.responses.set(id, entry);
      else this.done.set(id, entry.expiresAt);
    }
  }

  /** What memory says: `respond` is a handled request whose response must go out again. */
  state(id: string): "new" | "processing" | "done" | "respond" {
    if (this.processing.has(id)) return "processing";
    if (this.done.has(id)) return "done";
    return this.responses.has(id) ? "respond" : "new";
  }

  start(id: string): void {
    this.processing.add(id);
  }

  /** What an earlier run recorded for `id` (a response to send again, or the application's record). */
  async recorded(id: string): Promise<HandledRecord | undefined> {
    const pending = this.responses.get(id);
    if (pending) return { response: pending.response as Record<string, unknown> };
    if (this.done.has(id)) return { done: true };
    return this.store ? await this.store.get(id) : undefined;
  }

  /**
   * Records a request's signed response before it is submitted. Resolves once it is safe to
   * submit: a crash from then on finds the response, and the redelivery sends it again.
   */
  async respond(id: string, response: Record<string, unknown>): Promise<void> {
    const entry = { expiresAt: Date.now() + this.settings.retentionMs, response };
    this.responses.set(id, entry);
    if (this.store) {
      await this.store.record(id, { response });
    } else if (this.log) {
      // Written by now (a kill -9 cannot lose it); its fsync is awaited before the ack, in finish.
      const durable = this.log.append(id, entry);
      durable.catch(() => undefined);
      this.writing.set(id, durable);
    }
  }

  /** Marks `id` handled (a request: its response accepted); resolves once that is durable. */
  finish(id: string): Promise<void> {
    this.processing.delete(id);
    this.responses.delete(id);
    const now = Date.now();
    const expiresAt = now + this.settings.retentionMs;
    this.done.delete(id);
    this.done.set(id, expiresAt);
    this.evict(now);
    const response = this.writing.get(id);
    this.writing.delete(id);
    let durable: Promise<void>;
    if (this.store) {
      try {
        durable = Promise.resolve(this.store.record(id, { done: true }));
      } catch (err) {
        durable = Promise.reject(err);
      }
    } else if (this.log) {
      durable = this.log.append(id, { expiresAt });
    } else {
      return Promise.resolve();
    }
    return response ? Promise.all([response, durable]).then(() => undefined) : durable;
  }

  /**
   * Processing was abandoned (the agent is closing, the registry could not be asked): a redelivery
   * brings it back. A response already recorded stays, to be sent again then.
   */
  abandon(id: string): void {
    this.processing.delete(id);
  }

  /** Resolves when every record is on disk. */
  async close(): Promise<void> {
    await Promise.allSettled(this.writing.values());
    await this.log?.close();
  }

  get inProgress(): number {
    return this.processing.size;
  }

  private *entries(): Iterable<[string, HandledEntry]> {
    for (const [id, expiresAt] of this.done) yield [id, { expiresAt }];
    yield* this.responses;
  }

  private evict(now: number): void {
    for (const [id, expiresAt] of this.done) {
      if (this.done.size <= this.capacity && expiresAt > now) return;
      this.done.delete(id);
    }
  }
}
