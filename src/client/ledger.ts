import { HandledLog } from "./handled-log.js";

export interface LedgerSettings {
  /** How long a handled id is kept: the replay window, past which a redelivery is refused as stale anyway. */
  retentionMs: number;
  /** At most this many handled ids are kept (the oldest are forgotten first). Default 100 000. */
  capacity?: number;
  /** Persist handled ids under this state root (`<root>/<agent-id>/handled.log`); absent: memory only. */
  persist?: { root: string; agentId: string };
}

/**
 * Exactly-once for the application on top of the gateway's at-least-once delivery. Every delivery
 * id the agent has started is remembered: a redelivery of one still being processed is ignored (the
 * running processing acknowledges it), a redelivery of a finished one is only acknowledged.
 *
 * Finished ids are kept for `retentionMs` (the replay window: an older message fails the timestamp
 * check before the handler could see it) and at most `capacity` of them, far more than the gateway
 * ever redelivers. With a state root they are also written to disk (handled-log.ts), so an agent
 * restarted after its handler ran but before the gateway saw the ack still recognises the
 * redelivery. The id is recorded once the handler finished (and its response was accepted): a
 * crash while it runs means it runs again, never that the message is lost.
 */
export class DeliveryLedger {
  private readonly processing = new Set<string>();
  /** Finished id → when it may be forgotten; insertion order is expiry order (fixed retention). */
  private readonly done = new Map<string, number>();
  private readonly capacity: number;
  private readonly log: HandledLog | undefined;

  constructor(private readonly settings: LedgerSettings) {
    this.capacity = settings.capacity ?? 100_000;
    this.log = settings.persist
      ? new HandledLog(settings.persist.root, settings.persist.agentId, this.done, {
          capacity: this.capacity,
        })
      : undefined;
  }

  /** Where handled ids are persisted (undefined: memory only). */
  get file(): string | undefined {
    return this.log?.file;
  }

  /** Loads the ids handled by earlier runs. */
  async open(): Promise<void> {
    if (!this.log) return;
    for (const [id, expiresAt] of await this.log.load()) this.done.set(id, expiresAt);
  }

  state(id: string): "new" | "processing" | "done" {
    if (this.processing.has(id)) return "processing";
    return this.done.has(id) ? "done" : "new";
  }

  start(id: string): void {
    this.processing.add(id);
  }

  /** Marks `id` handled; resolves once that is on disk (at once without a state root). */
  finish(id: string): Promise<void> {
    this.processing.delete(id);
    const now = Date.now();
    const expiresAt = now + this.settings.retentionMs;
    this.done.delete(id);
    this.done.set(id, expiresAt);
    this.evict(now);
    return this.log ? this.log.append(id, expiresAt) : Promise.resolve();
  }

  /** Processing was abandoned (the agent is closing, a response could not be sent): a redelivery brings it back. */
  abandon(id: string): void {
    this.processing.delete(id);
  }

  /** Resolves when every finished id is on disk. */
  close(): Promise<void> {
    return this.log ? this.log.flush() : Promise.resolve();
  }

  get inProgress(): number {
    return this.processing.size;
  }

  private evict(now: number): void {
    for (const [id, expiresAt] of this.done) {
      if (this.done.size <= this.capacity && expiresAt > now) return;
      this.done.delete(id);
    }
  }
}
