import { JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { LEGACY_INDEX_STREAM } from "./layout.js";

/** How often the legacy stream is asked again how far it reaches. */
const RECHECK_MS = 60_000;
/** Subjects remembered as having nothing left from some sequence on. */
const SUBJECT_LIMIT = 10_000;

/**
 * The index stream of brokers made before the shards (`ACP_INDEX`, one entry per message on
 * `acp.index.<from>.<to>`), which `list` walks, ahead of the shards, until retention has emptied
 * it. A walk of it is a wildcard: nats-server reads every entry from its start to the next match,
 * to the stream's end when there is none. So a subject found to have nothing left from some
 * sequence on is remembered (until the stream grows: a broker of the earlier layout still writing).
 */
export class LegacyIndex {
  private checkedAt: number;
  /** Whether the stream exists and holds entries (asked again once a minute). */
  private holds = false;
  private lastSeq = 0;
  /** Per subject: the lowest sequence from which it has no entry. */
  private readonly noneAfter = new Map<string, number>();

  private constructor(
    private readonly jsm: JetStreamManager,
    private readonly now: () => number,
  ) {
    this.checkedAt = now();
  }

  static async open(jsm: JetStreamManager, now: () => number = Date.now): Promise<LegacyIndex> {
    const legacy = new LegacyIndex(jsm, now);
    await legacy.check();
    return legacy;
  }

  /** Whether `list` walks the legacy stream: it exists and holds entries. */
  async present(): Promise<boolean> {
    if (this.now() - this.checkedAt >= RECHECK_MS) {
      this.checkedAt = this.now();
      await this.check();
    }
    return this.holds;
  }

  private async check(): Promise<void> {
    try {
      const { state } = await this.jsm.streams.info(LEGACY_INDEX_STREAM);
      if (state.last_seq !== this.lastSeq) this.noneAfter.clear();
      this.lastSeq = state.last_seq;
      this.holds = state.messages > 0;
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || error.code !== 10059) throw error;
      this.holds = false;
    }
  }

  noneFrom(subject: string, seq: number): boolean {
    const none = this.noneAfter.get(subject);
    return none !== undefined && seq >= none;
  }

  noteNoneFrom(subject: string, seq: number): void {
    const known = this.noneAfter.get(subject);
    if (known !== undefined && known <= seq) return;
    this.noneAfter.delete(subject);
    this.noneAfter.set(subject, seq);
    if (this.noneAfter.size > SUBJECT_LIMIT) {
      const oldest = this.noneAfter.keys().next().value;
      if (oldest !== undefined) this.noneAfter.delete(oldest);
    }
  }
}
