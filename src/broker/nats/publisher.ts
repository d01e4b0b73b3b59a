import { type ApiError, JetStreamApiError } from "@nats-io/jetstream";
import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import { BrokerError } from "../errors.js";
import { WriteFailures } from "../write-failures.js";
import { TurnWrites } from "./connection.js";

/** A stream's answer to a stored publish. */
export interface PubAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

interface Waiting {
  resolve: (ack: PubAck) => void;
  reject: (error: unknown) => void;
  deadline: number;
}

/** As long as the JetStream client waits for a publish acknowledgement by default. */
const TIMEOUT_MS = 5_000;

/**
 * JetStream's answers that mean "cannot store": insufficient resources (the server's or account's
 * storage limit), storage or memory resources exceeded, and the store's own write failing (a full
 * disk, a file size limit).
 */
const STORAGE_REFUSALS = new Set([10023, 10028, 10047, 10077]);

/**
 * How long a storage refusal keeps `health()` degraded when no write succeeds meanwhile. NATS offers
 * no write that stores nothing (preconditions are checked before the storage), so health cannot
 * probe: a gateway taken out of service is tried again after this, and the next refusal counts anew.
 */
const STORAGE_REFUSAL_MEMORY_MS = 30_000;

/**
 * Publishes into JetStream streams (envelopes, index entries, status records) and resolves with the
 * stream's acknowledgement, like `js.publish`, for the broker's hot path. The client's request path
 * constructs an Error (with its stack) for every request it completes and arms a timer per request;
 * at five stored writes per message that was a large part of the broker's CPU. Here one
 * subscription takes every reply and one interval checks deadlines. Storage refusals are kept in
 * `failures` for `health()`; any stored write ends them.
 */
export class StreamPublisher {
  readonly failures = new WriteFailures(STORAGE_REFUSAL_MEMORY_MS);
  private readonly prefix: string;
  private readonly subscription: Subscription;
  private readonly waiting = new Map<number, Waiting>();
  private readonly decoder = new TextDecoder();
  private lastToken = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Every publish of a turn leaves in one socket write (acks and pulls made in that turn too). */
  readonly turnWrites: TurnWrites;

  constructor(private readonly nc: NatsConnection) {
    this.turnWrites = new TurnWrites(nc);
    this.prefix = createInbox();
    this.subscription = nc.subscribe(`${this.prefix}.*`, {
      callback: (error, msg) => {
        if (!error) this.answered(msg);
      },
    });
  }

  /** Stores `data` on `subject`; rejects with JetStreamApiError when the stream refuses it (e.g. compare-and-set). */
  publish(subject: string, data: string, headers?: MsgHdrs): Promise<PubAck> {
    this.lastToken += 1;
    const token = this.lastToken;
    return new Promise<PubAck>((resolve, reject) => {
      try {
        this.turnWrites.hold();
        this.nc.publish(subject, data, { reply: `${this.prefix}.${token}`, ...(headers ? { headers } : {}) });
      } catch (error) {
        reject(error);
        return;
      }
      this.waiting.set(token, { resolve, reject, deadline: Date.now() + TIMEOUT_MS });
      this.timer ??= setInterval(() => this.expire(), 250).unref();
    });
  }

  /** Fails what is still waiting; the connection is closed or draining. */
  stop(): void {
    this.subscription.unsubscribe();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const waiting of this.waiting.values()) {
      waiting.reject(new BrokerError("closed", "the broker is closed"));
    }
    this.waiting.clear();
  }

  private answered(msg: Msg): void {
    const token = Number(msg.subject.slice(this.prefix.length + 1));
    const waiting = this.waiting.get(token);
    if (!waiting) return; // answered after its deadline
    this.waiting.delete(token);
    const status = msg.headers?.code ?? 0;
    if (status >= 300) {
      // 503: no stream listens on the subject (JetStream down or the stream missing).
      waiting.reject(new Error(`JetStream answered ${status} ${msg.headers?.description ?? ""}`.trim()));
      return;
    }
    try {
      const answer = JSON.parse(this.decoder.decode(msg.data)) as Partial<PubAck> & { error?: ApiError };
      if (answer.error) {
        if (STORAGE_REFUSALS.has(answer.error.err_code)) {
          this.failures.failed(
            `write failed: ${answer.error.description} (JetStream ${answer.error.err_code})`,
          );
        }
        waiting.reject(new JetStreamApiError(answer.error));
      } else {
        // A duplicate stored nothing, so it proves nothing about the storage.
        if (answer.duplicate !== true) this.failures.succeeded();
        waiting.resolve({
          stream: answer.stream ?? "",
          seq: answer.seq ?? 0,
          duplicate: answer.duplicate === true,
        });
      }
    } catch (error) {
      waiting.reject(error);
    }
  }

  /** Requests wait in publish order, so their deadlines are in order: stop at the first still running. */
  private expire(): void {
    if (this.waiting.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      return;
    }
    const now = Date.now();
    for (const [token, waiting] of this.waiting) {
      if (waiting.deadline > now) return;
      this.waiting.delete(token);
      waiting.reject(new Error(`no acknowledgement from JetStream within ${TIMEOUT_MS} ms`));
    }
  }
}
