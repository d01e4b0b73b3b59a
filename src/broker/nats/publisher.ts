import { type ApiError, JetStreamApiError } from "@nats-io/jetstream";
import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import { BrokerError } from "../errors.js";

/** A stream's answer to a stored publish. */
export interface PubAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

interface Caller {
  resolve: (ack: PubAck) => void;
  reject: (error: unknown) => void;
}

interface Waiting extends Caller {
  deadline: number;
}

interface Outgoing extends Caller {
  token: number;
  subject: string;
  data: string;
  headers: MsgHdrs | undefined;
}

/** As long as the JetStream client waits for a publish acknowledgement by default. */
const TIMEOUT_MS = 5_000;

/**
 * Publishes into JetStream streams (envelopes, index entries, status records) and resolves with the
 * stream's acknowledgement, like `js.publish`, for the broker's hot path. The client's request path
 * constructs an Error (with its stack) for every request it completes and arms a timer per request;
 * at five stored writes per message that was a large part of the broker's CPU. Here one
 * subscription takes every reply and one interval checks deadlines. Publishes made during one turn
 * of the event loop go out together on the next `setImmediate`, so the client writes them to the
 * socket at once (one system call) instead of once per promise continuation that made one.
 */
export class StreamPublisher {
  private readonly prefix: string;
  private readonly subscription: Subscription;
  private readonly waiting = new Map<number, Waiting>();
  private readonly decoder = new TextDecoder();
  private lastToken = 0;
  private timer: NodeJS.Timeout | null = null;
  private outbox: Outgoing[] = [];
  private sending: NodeJS.Immediate | null = null;

  constructor(private readonly nc: NatsConnection) {
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
      this.outbox.push({ token, subject, data, headers, resolve, reject });
      this.sending ??= setImmediate(() => this.send());
    });
  }

  /** Publishes everything queued, in order. */
  private send(): void {
    this.sending = null;
    const outbox = this.outbox;
    this.outbox = [];
    const deadline = Date.now() + TIMEOUT_MS;
    for (const item of outbox) {
      const options = {
        reply: `${this.prefix}.${item.token}`,
        ...(item.headers ? { headers: item.headers } : {}),
      };
      try {
        this.nc.publish(item.subject, item.data, options);
      } catch (error) {
        item.reject(error);
        continue;
      }
      this.waiting.set(item.token, { resolve: item.resolve, reject: item.reject, deadline });
    }
    this.timer ??= setInterval(() => this.expire(), 250).unref();
  }

  /** Fails what is still waiting; the connection is closed or draining. */
  stop(): void {
    if (this.sending) clearImmediate(this.sending);
    this.sending = null;
    for (const item of this.outbox.splice(0)) item.reject(new BrokerError("closed", "the broker is closed"));
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
      if (answer.error) waiting.reject(new JetStreamApiError(answer.error));
      else
        waiting.resolve({
          stream: answer.stream ?? "",
          seq: answer.seq ?? 0,
          duplicate: answer.duplicate === true,
        });
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
