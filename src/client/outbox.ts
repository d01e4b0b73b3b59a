import { AcpError } from "../protocol/index.js";
import type { SubmitResponse } from "../wire/api.js";

export interface SubmitRetryOptions {
  /**
   * How many times one envelope may be sent in all, the first time included (default 10; 1 never
   * resends; `Infinity` resends until the caller's deadline). A send counts once its outcome is a
   * retryable refusal or unknown (the socket dropped before the answer).
   */
  maxAttempts?: number;
  /** Delay before the first resend (default 100 ms); doubles per attempt, jittered to 50–100 %. */
  initialDelayMs?: number;
  /** Upper bound of that delay (default 5 s). A 429's Retry-After is honoured as given. */
  maxDelayMs?: number;
}

export interface SubmitOptions {
  /** The signed message-id, for events and errors. */
  messageId: string;
  /** Epoch ms: past it nothing is resent and the submission fails (the caller's timeout). */
  deadline?: number;
  signal?: AbortSignal;
}

/** Reported (as the agent's `resubmit` event) before each resend of the identical envelope. */
export interface ResubmitInfo {
  messageId: string;
  /** The attempt about to be made (2 for the first resend). */
  attempt: number;
  /** `connection-lost`, or the gateway's refusal (`StorageUnavailable`, `RateLimited`). */
  cause: "connection-lost" | "StorageUnavailable" | "RateLimited";
  /** Wait before this resend (0: on the next connection). */
  delayMs: number;
}

interface Entry {
  ref: number;
  envelope: Record<string, unknown>;
  options: SubmitOptions;
  /** Sends whose outcome was a retryable refusal or unknown. */
  failedAttempts: number;
  /** Sent on the current socket and not answered yet. */
  inFlight: boolean;
  /** A delay before the next send is running: the next connection must not send it early. */
  backingOff: boolean;
  /** Some send may have been stored by the gateway (an unanswered send, or a 503 from NATS). */
  mayHaveBeenAccepted: boolean;
  /** The latest retryable refusal, if the latest failed send was refused rather than unanswered. */
  lastRefusal: AcpError | undefined;
  timers: Set<NodeJS.Timeout>;
  resolve(result: SubmitResponse): void;
  reject(err: Error): void;
  detach(): void;
}

const DEFAULTS = { maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 5_000 };
/** When a 429 names no delay. */
const DEFAULT_RETRY_AFTER_MS = 1_000;

/** Each delay is 50–100 % of `min(maxDelayMs, initialDelayMs·2^n)`: clients that failed together spread out. */
export function backoffDelay(n: number, initialDelayMs: number, maxDelayMs: number): number {
  const base = Math.min(maxDelayMs, initialDelayMs * 2 ** n);
  return base / 2 + (Math.random() * base) / 2;
}

/**
 * Submissions whose answer the agent has not received yet, keyed by `ref`. Resending the identical
 * signed envelope is always safe — the gateway deduplicates by message-id and answers a stored one
 * `duplicate: true` with the same id — so a submission whose outcome is unknown (the socket dropped
 * before the answer; a 503, which on NATS may follow a store whose acknowledgement was lost) is
 * sent again with backoff, as is a 429 after its Retry-After. Every other refusal is final. Each
 * submission ends at its caller's deadline or after `maxAttempts` sends, whichever comes first.
 */
export class Outbox {
  private readonly entries = new Map<number, Entry>();
  private readonly settings: Required<SubmitRetryOptions>;
  private nextRef = 1;

  constructor(
    retry: SubmitRetryOptions | undefined,
    private readonly transport: {
      /** Sends one `submit` frame; false when the socket is not ready. */
      send(ref: number, envelope: Record<string, unknown>): boolean;
      /** Before each resend; `refusal`: the gateway's retryable refusal that caused it, if it answered. */
      resubmitting(info: ResubmitInfo, refusal?: AcpError): void;
    },
  ) {
    this.settings = { ...DEFAULTS, ...retry };
  }

  submit(envelope: Record<string, unknown>, options: SubmitOptions): Promise<SubmitResponse> {
    return new Promise((resolve, reject) => {
      if (options.signal?.aborted) {
        reject(cancelled(options.messageId, false));
        return;
      }
      const ref = this.nextRef++;
      const entry: Entry = {
        ref,
        envelope,
        options,
        failedAttempts: 0,
        inFlight: false,
        backingOff: false,
        mayHaveBeenAccepted: false,
        lastRefusal: undefined,
        timers: new Set(),
        resolve,
        reject,
        detach: () => undefined,
      };
      const onAbort = () =>
        this.fail(entry, cancelled(options.messageId, entry.mayHaveBeenAccepted || entry.inFlight));
      options.signal?.addEventListener("abort", onAbort, { once: true });
      entry.detach = () => options.signal?.removeEventListener("abort", onAbort);
      if (options.deadline !== undefined) {
        this.later(entry, Math.max(0, options.deadline - Date.now()), () =>
          this.fail(entry, this.timedOut(entry)),
        );
      }
      this.entries.set(ref, entry);
      this.transmit(entry);
    });
  }

  /** Some submission is being sent again after a refusal or a lost answer, and has not been accepted yet. */
  get retrying(): boolean {
    for (const entry of this.entries.values()) if (entry.failedAttempts > 0) return true;
    return false;
  }

  /** True for refs this outbox handed out, answered or not: a late answer is not someone else's. */
  issued(ref: number): boolean {
    return ref > 0 && ref < this.nextRef;
  }

  /** A new connection is ready: sends everything that is not waiting out a backoff, in order. */
  connectionReady(): void {
    for (const entry of this.entries.values()) {
      if (!entry.inFlight && !entry.backingOff) this.transmit(entry);
    }
  }

  /** The socket dropped: whatever was in flight has an unknown outcome and goes out again on the next connection. */
  connectionLost(): void {
    for (const entry of [...this.entries.values()]) {
      if (!entry.inFlight) continue;
      entry.inFlight = false;
      entry.mayHaveBeenAccepted = true;
      entry.lastRefusal = undefined;
      entry.failedAttempts++;
      if (entry.failedAttempts >= this.settings.maxAttempts) {
        this.fail(entry, this.timedOut(entry));
        continue;
      }
      this.transport.resubmitting({
        messageId: entry.options.messageId,
        attempt: entry.failedAttempts + 1,
        cause: "connection-lost",
        delayMs: 0,
      });
    }
  }

  accepted(ref: number, result: SubmitResponse): void {
    const entry = this.entries.get(ref);
    if (!entry) return;
    this.forget(entry);
    entry.resolve(result);
  }

  /** The gateway refused the submission `ref`: resend later when that is safe and useful, else fail. */
  refused(ref: number, err: AcpError): void {
    const entry = this.entries.get(ref);
    if (!entry) return;
    entry.inFlight = false;
    if (err.kind !== "StorageUnavailable" && err.kind !== "RateLimited") {
      this.fail(entry, err);
      return;
    }
    entry.failedAttempts++;
    entry.lastRefusal = err;
    // A 429 is a refusal before anything was stored; a 503 on NATS may come after the store.
    if (err.kind === "StorageUnavailable") entry.mayHaveBeenAccepted = true;
    const delayMs =
      err.kind === "RateLimited"
        ? retryAfterMs(err.data)
        : backoffDelay(entry.failedAttempts - 1, this.settings.initialDelayMs, this.settings.maxDelayMs);
    const { deadline } = entry.options;
    if (
      entry.failedAttempts >= this.settings.maxAttempts ||
      (deadline !== undefined && Date.now() + delayMs >= deadline)
    ) {
      this.fail(entry, this.gaveUp(entry, err));
      return;
    }
    this.transport.resubmitting(
      {
        messageId: entry.options.messageId,
        attempt: entry.failedAttempts + 1,
        cause: err.kind,
        delayMs: Math.round(delayMs),
      },
      err,
    );
    entry.backingOff = true;
    this.later(entry, delayMs, () => {
      entry.backingOff = false;
      this.transmit(entry); // not connected: the next connection sends it
    });
  }

  /** Fails every submission (the agent closes, or its connection ended for good). */
  failAll(err: AcpError): void {
    for (const entry of [...this.entries.values()]) {
      this.fail(
        entry,
        new AcpError(err.kind, err.message, {
          ...err.data,
          messageId: entry.options.messageId,
          mayHaveBeenAccepted: entry.mayHaveBeenAccepted || entry.inFlight,
        }),
      );
    }
  }

  private transmit(entry: Entry): void {
    entry.inFlight = this.transport.send(entry.ref, entry.envelope);
  }

  private later(entry: Entry, delayMs: number, run: () => void): void {
    const timer = setTimeout(() => {
      entry.timers.delete(timer);
      if (this.entries.get(entry.ref) === entry) run();
    }, delayMs);
    entry.timers.add(timer);
  }

  private fail(entry: Entry, err: Error): void {
    if (this.entries.get(entry.ref) !== entry) return;
    this.forget(entry);
    entry.reject(err);
  }

  private forget(entry: Entry): void {
    this.entries.delete(entry.ref);
    for (const timer of entry.timers) clearTimeout(timer);
    entry.timers.clear();
    entry.detach();
  }

  private gaveUp(entry: Entry, err: AcpError): AcpError {
    return new AcpError(err.kind, `${err.message} (gave up after ${entry.failedAttempts} attempts)`, {
      ...err.data,
      messageId: entry.options.messageId,
      attempts: entry.failedAttempts,
      mayHaveBeenAccepted: entry.mayHaveBeenAccepted,
    });
  }

  private timedOut(entry: Entry): AcpError {
    const { messageId } = entry.options;
    const attempts = entry.failedAttempts + (entry.inFlight ? 1 : 0);
    const mayHaveBeenAccepted = entry.mayHaveBeenAccepted || entry.inFlight;
    const tries = `${attempts} attempt${attempts === 1 ? "" : "s"}`;
    const detail =
      attempts === 0
        ? "it could not be sent: no connection to the gateway"
        : entry.lastRefusal && !entry.inFlight
          ? `the gateway still refused it after ${tries} (${entry.lastRefusal.message})`
          : `no answer from the gateway after ${tries}`;
    const maybe = mayHaveBeenAccepted ? "; it may have been accepted" : "";
    return new AcpError("Timeout", `message ${messageId} was not submitted: ${detail}${maybe}`, {
      messageId,
      attempts,
      mayHaveBeenAccepted,
    });
  }
}

function cancelled(messageId: string, mayHaveBeenAccepted: boolean): AcpError {
  return new AcpError("Cancelled", `the submission of ${messageId} was cancelled`, {
    messageId,
    mayHaveBeenAccepted,
  });
}

/**
 * The submission ended without the gateway's final word (deadline, attempts, cancelled, the
 * connection ended): every error the outbox gives up with says whether the message may have been
 * accepted; a refusal by the gateway itself does not.
 */
export function submissionUnsettled(err: unknown): boolean {
  return err instanceof AcpError && typeof err.data.mayHaveBeenAccepted === "boolean";
}

function retryAfterMs(data: Record<string, unknown>): number {
  if (typeof data.retryAfterMs === "number") return data.retryAfterMs;
  if (typeof data.retryAfterSeconds === "number") return data.retryAfterSeconds * 1000;
  if (typeof data.retryAfter === "number") return data.retryAfter * 1000;
  return DEFAULT_RETRY_AFTER_MS;
}
