import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import { Listeners } from "../listeners.js";
import type { BrokerPolicy, Warn } from "../policy.js";
import { buildRecord } from "../records.js";
import type { BrokerEvent, Unsubscribe } from "../types.js";
import { refOfMessageKey } from "../validation.js";
import { CHANGES_PREFIX, STATUS_BUCKET, USER_BUCKET_PREFIX } from "./layout.js";
import { fromStored, type StatusDoc } from "./status-store.js";

const SUBJECT = /^acp\.changes\.([^.]+)\.(.+)$/;

/**
 * `events()` on NATS. Every bucket republishes its stored writes to `acp.changes.<bucket>.<key>`,
 * so one core subscription sees the changes made through every gateway. It exists only while
 * someone listens.
 */
export class ChangeFeed {
  private readonly listeners: Listeners<BrokerEvent>;
  private subscription: Subscription | null = null;
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly nc: NatsConnection,
    private readonly policy: BrokerPolicy,
    private readonly warn: Warn,
  ) {
    this.listeners = new Listeners(warn);
  }

  async add(handler: (event: BrokerEvent) => void): Promise<Unsubscribe> {
    const remove = this.listeners.add(handler);
    if (!this.subscription) {
      this.subscription = this.nc.subscribe(`${CHANGES_PREFIX}.>`, {
        callback: (error, msg) => {
          if (!error) this.received(msg);
        },
      });
      // The subscription is registered on the server before this resolves: no change after it is missed.
      await this.nc.flush();
    }
    return () => {
      remove();
      if (this.listeners.size === 0) this.stop();
    };
  }

  stop(): void {
    this.listeners.clear();
    this.subscription?.unsubscribe();
    this.subscription = null;
  }

  private received(msg: Msg): void {
    const match = SUBJECT.exec(msg.subject);
    const bucket = match?.[1];
    const key = match?.[2];
    if (!bucket || !key) return;
    const deleted = isDeleteMarker(msg);
    try {
      if (bucket === STATUS_BUCKET) {
        const message = refOfMessageKey(key);
        if (deleted || !message) return;
        const doc = fromStored(JSON.parse(this.decoder.decode(msg.data)) as StatusDoc, message);
        this.listeners.emit({ type: "message.status", message: buildRecord(doc, this.policy, Date.now()) });
      } else if (bucket.startsWith(USER_BUCKET_PREFIX)) {
        this.listeners.emit({
          type: "kv",
          bucket: bucket.slice(USER_BUCKET_PREFIX.length),
          key,
          op: deleted ? "delete" : "put",
          value: deleted ? null : (JSON.parse(this.decoder.decode(msg.data)) as unknown),
        });
      }
    } catch (error) {
      this.warn(`unreadable change on ${msg.subject}: ${String(error)}`);
    }
  }
}

/**
 * A KV delete or purge: a marker without a value, its operation in a header. Every stored value is
 * JSON, never empty, so only an empty message needs its headers decoded: nats.js decodes them on
 * first use, and every republished write carries four, which was half of this feed's cost per
 * status write.
 */
function isDeleteMarker(msg: Msg): boolean {
  if (msg.data.length > 0) return false;
  const operation = msg.headers?.get("KV-Operation") ?? "";
  return operation === "DEL" || operation === "PURGE";
}
