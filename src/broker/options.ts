/**
 * What a broker is opened with: the delivery policy, retention and quotas both drivers take, and
 * each driver's own (the embedded store's data directory, the NATS connection). `openBroker`
 * (open.ts) picks the driver by which options it is given.
 */

/**
 * Limits on what the broker holds for one agent; `submit` refuses a message past any of them with
 * BrokerError `quota` (nothing is stored). Each is off when absent.
 */
export interface BrokerQuotas {
  /** Messages to one recipient not yet acknowledged, failed or expired. */
  recipientPendingMessages?: number;
  /** The UTF-8 bytes of those messages' envelopes. */
  recipientPendingBytes?: number;
  /** The UTF-8 bytes of one sender's envelopes the broker still stores (within retention, any status). */
  senderStoredBytes?: number;
}

export interface DeliveryOptions {
  /** Time to acknowledge the first delivery before it is redelivered. Default 30 s. */
  ackWaitMs?: number;
  /** Deliveries per message before it is dead-lettered. Default 6: the first and 5 retries. */
  maxDeliver?: number;
  /** Each further ack wait is this many times the previous one. Default 2. */
  backoffFactor?: number;
}

export interface CommonBrokerOptions {
  delivery?: DeliveryOptions;
  /** How long envelopes are kept (and undelivered messages wait) before `expired`. Default 7 days. */
  retentionMs?: number;
  /** How long status records are kept, so `status(id)` still answers `expired`. Default 30 days. */
  recordRetentionMs?: number;
  /** Per-agent limits `submit` enforces (default: none). */
  quotas?: BrokerQuotas;
  /**
   * Problems the broker recovers from by itself (a listener that threw, a delivery left for
   * redelivery while NATS is unreachable). Default: `process.emitWarning`. Never carries bodies.
   */
  onWarning?: (message: string) => void;
  /**
   * What the broker does by itself that an operator may want to follow: on NATS, a stream's max_age
   * lowered after start (its start, progress and end). Default: nothing. Never carries bodies.
   */
  onNotice?: (message: string) => void;
}

export interface EmbeddedBrokerOptions extends CommonBrokerOptions {
  /** Data directory; the database is `<data>/acp.db`. Default `./.acp`. */
  data?: string;
  /**
   * `normal` (default): WAL with synchronous=NORMAL, nothing acknowledged is lost when the process
   * dies (kill -9); a power loss may drop the last transactions. `full`: fsync on every commit.
   */
  synchronous?: "normal" | "full";
}

export interface NatsTlsOptions {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

export interface NatsConnectionOptions {
  servers: string | string[];
  user?: string;
  pass?: string;
  token?: string;
  /** A `.creds` file (JWT + NKey seed). */
  credsFile?: string;
  /** `true` requires TLS with the system CAs; an object adds files. */
  tls?: boolean | NatsTlsOptions;
  /** Stream and KV replicas (3 on a 3-node cluster). Default 1. */
  replicas?: number;
  /** Connection name shown by the server (`nats server report connections`). */
  name?: string;
  /**
   * Most submissions this gateway has in JetStream at once (stored writes not yet acknowledged);
   * more wait their turn in arrival order. Status writes and acks are never held. Default 1,000.
   */
  maxPendingSubmits?: number;
  /** How long a submission waits for its turn before it is refused as `unavailable`. Default 5,000 ms. */
  submitStallMs?: number;
}

export interface NatsBrokerOptions extends CommonBrokerOptions {
  nats: NatsConnectionOptions;
}

export type OpenBrokerOptions = EmbeddedBrokerOptions | NatsBrokerOptions;
