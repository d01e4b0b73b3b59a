/**
 * Lowers a stream's max_age after the broker has opened (a gateway started with a shorter
 * retention than its streams'). nats-server (2.9) expires what a lower max_age makes due inside the
 * update request, one message at a time, telling every consumer of the stream about each removal
 * (the inbox stream has one per agent), and reads nothing else from the connection that sent the
 * update meanwhile: a week-old store's day takes minutes of a core. So the lowering is sent on a
 * connection of its own, never the broker's, and in paced steps: each step's max_age is the age of
 * the message a step's size past the stream's first, the size chosen so that the update takes about
 * `stepMs` (a relayed message in flight meanwhile waits for one short step, not a long one), and
 * each step is followed by a rest as long as it took times `restPerStep` (so the relay keeps most of
 * nats-server's time). Each update is answered within its timeout, and the stream's max_age always
 * says how far it got (a restart goes on from there). Failures are warned about and retried; the
 * broker works meanwhile (it computes `expired` from its own retention, and terminates what it pulls
 * past it).
 */
import { type JetStreamManager, jetstreamManager, type MsgRequest } from "@nats-io/jetstream";
import { millis, type NatsConnection, nanos } from "@nats-io/transport-node";
import type { Warn } from "../policy.js";
import type { LowerMaxAge } from "./layout.js";

/** How a lowering sizes its steps and rests between them. */
export interface StepPacing {
  /** The first step's messages; each later step is sized from how long the one before took. */
  firstStep: number;
  /** The fewest and the most messages a step expires. */
  minStep: number;
  maxStep: number;
  /** How long a step's update is meant to take: under a relayed message's usual round trip. */
  stepMs: number;
  /** The rest after each step, as a multiple of the time its update took. */
  restPerStep: number;
}

/**
 * With 1,000 consumers on the stream a message's removal costs nats-server about 0.25–0.45 ms, so a
 * 40 ms step expires about a hundred; with a handful of consumers, thousands. Resting as long as
 * each step took gives nats-server's expiry at most half of its time.
 */
export const DEFAULT_PACING: StepPacing = {
  firstStep: 100,
  minStep: 10,
  maxStep: 10_000,
  stepMs: 40,
  restPerStep: 1,
};

/** The next step's size: the last one's scaled to take `stepMs`, at most doubled, within the bounds. */
export function nextStepSize(pacing: StepPacing, lastStep: number, lastTookMs: number): number {
  const scaled = Math.round((lastStep * pacing.stepMs) / Math.max(lastTookMs, 1));
  return Math.min(pacing.maxStep, Math.max(pacing.minStep, Math.min(scaled, 2 * lastStep)));
}
/** A step's update is answered once its expiry is done: more room than the broker's usual 5 s. */
const STEP_TIMEOUT_MS = 60_000;
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 60_000;
/** How often a long lowering says how far it got. */
const PROGRESS_EVERY_MS = 30_000;

export interface MaxAgeLog {
  notice: Warn;
  warn: Warn;
}

export class MaxAgeLowering {
  private stopped = false;
  private nc: NatsConnection | undefined;
  private jsm: JetStreamManager | undefined;
  private wake: (() => void) | undefined;
  /** Settles once every stream is at its max_age, or once stopped. Never rejects. */
  readonly done: Promise<void>;

  constructor(
    lowerings: readonly LowerMaxAge[],
    private readonly connect: () => Promise<NatsConnection>,
    private readonly log: MaxAgeLog,
    private readonly pacing: StepPacing = DEFAULT_PACING,
  ) {
    this.done = this.run(lowerings);
  }

  /** Stops between steps (a step under way goes on in nats-server); the next start goes on from there. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.disconnect();
    await this.done;
  }

  private async run(lowerings: readonly LowerMaxAge[]): Promise<void> {
    for (const lowering of lowerings) {
      if (!(await this.lower(lowering))) break;
    }
    await this.disconnect();
  }

  /** False when stopped before the stream reached its max_age. */
  private async lower({ settings, from }: LowerMaxAge): Promise<boolean> {
    const { name } = settings;
    const target = settings.max_age;
    const started = performance.now();
    let reported = started;
    let steps = 0;
    let stepSize = this.pacing.firstStep;
    let restedMs = 0;
    let failures = 0;
    let firstSeq: number | undefined;
    let current = from;
    while (!this.stopped) {
      try {
        const jsm = await this.manager();
        const info = await jsm.streams.info(name);
        current = info.config.max_age;
        if (firstSeq === undefined) {
          firstSeq = info.state.first_seq;
          this.log.notice(
            `${name}: lowering max_age from ${duration(from)} to ${duration(target)} (${info.state.messages} messages held), ` +
              `in paced steps of ${this.pacing.minStep}–${this.pacing.maxStep} messages expired, on a connection of its own`,
          );
        }
        if (current !== 0 && current <= target) {
          const expired = info.state.first_seq - firstSeq;
          const seconds = ((performance.now() - started) / 1000).toFixed(1);
          this.log.notice(
            `${name}: max_age lowered from ${duration(from)} to ${duration(current)} in ${seconds} s ` +
              `(${steps} steps, resting ${(restedMs / 1000).toFixed(1)} s between them; ${expired} messages expired, ${info.state.messages} held)`,
          );
          return true;
        }
        const next = await this.nextMaxAge(jsm, name, info, target, stepSize);
        const stepStarted = performance.now();
        await jsm.streams.update(name, { ...settings, max_age: next });
        const tookMs = performance.now() - stepStarted;
        current = next;
        steps++;
        failures = 0;
        stepSize = nextStepSize(this.pacing, stepSize, tookMs);
        const restMs = tookMs * this.pacing.restPerStep;
        restedMs += restMs;
        await this.pause(restMs);
        if (performance.now() - reported >= PROGRESS_EVERY_MS) {
          reported = performance.now();
          this.log.notice(`${name}: lowering max_age, ${steps} steps so far, now ${duration(current)}`);
        }
      } catch (error) {
        if (this.stopped) break;
        const waitMs = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures++);
        this.log.warn(
          `${name}: lowering max_age to ${duration(target)} failed (${error instanceof Error ? error.message : String(error)}); ` +
            `it stays at ${duration(current)}, retrying in ${waitMs / 1000} s`,
        );
        await this.disconnect();
        await this.pause(waitMs);
      }
    }
    this.log.notice(
      `${name}: lowering max_age stopped at ${duration(current)} (target ${duration(target)}): the broker closed; the next start goes on`,
    );
    return false;
  }

  /**
   * The age of the message `stepSize` past the stream's first (gaps only make a step smaller),
   * never above the current max_age less the time between those two messages, so no step raises it;
   * the target once that message is younger or there is none. The age is this host's clock against
   * nats-server's stamp, as everything max_age does assumes synchronised clocks: with this clock
   * behind, a step expires more than `stepSize`; ahead, steps lower max_age by less.
   */
  private async nextMaxAge(
    jsm: JetStreamManager,
    name: string,
    info: { config: { max_age: number }; state: { first_seq: number; first_ts: string; messages: number } },
    target: number,
    stepSize: number,
  ): Promise<number> {
    if (info.state.messages === 0) return target;
    // From the leader (a KV bucket with replicas has no direct get), the first message at or past
    // that sequence: next_by_subj is in STREAM.MSG.GET since nats-server 2.9, not in the client's type.
    const next = { seq: info.state.first_seq + stepSize, next_by_subj: ">" };
    const step = await jsm.streams.getMessage(name, next as MsgRequest);
    if (!step) return target;
    const stepAt = step.time.getTime();
    const age = nanos(Math.max(0, Date.now() - stepAt));
    const current = info.config.max_age;
    const lowered =
      current === 0
        ? age
        : Math.min(age, current - nanos(Math.max(1, stepAt - Date.parse(info.state.first_ts))));
    return Math.max(target, lowered);
  }

  private async manager(): Promise<JetStreamManager> {
    if (this.jsm) return this.jsm;
    const nc = await this.connect();
    if (this.stopped) {
      await nc.close();
      throw new Error("stopped");
    }
    this.nc = nc;
    this.jsm = await jetstreamManager(nc, { timeout: STEP_TIMEOUT_MS });
    return this.jsm;
  }

  private async disconnect(): Promise<void> {
    const nc = this.nc;
    this.nc = undefined;
    this.jsm = undefined;
    await nc?.close().catch(() => undefined);
  }

  private pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** Nanoseconds as days, hours, minutes and seconds (the two largest), `none` for 0. */
function duration(ns: number): string {
  if (ns === 0) return "none";
  let ms = Math.round(millis(ns));
  const parts: string[] = [];
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["min", 60_000],
    ["s", 1_000],
  ] as const) {
    if (ms >= size && parts.length < 2) {
      parts.push(`${Math.floor(ms / size)} ${unit}`);
      ms %= size;
    }
  }
  return parts.length > 0 ? parts.join(" ") : `${ms} ms`;
}
