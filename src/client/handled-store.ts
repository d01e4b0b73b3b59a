import { AcpError } from "../protocol/index.js";
import { deliveredKey } from "./connection.js";

/** A delivery as its handler sees it (its InboundContext): who sent it, and its message-id. */
export interface HandledDelivery {
  from: string;
  messageId: string;
}

/**
 * The key a HandledStore keeps a delivery's record under: `<sender>/<message-id>`. Message ids are
 * per sender, so another agent's message with the same id is another message, never "handled".
 */
export function handledKey({ from, messageId }: HandledDelivery): string {
  return deliveredKey({ from, id: messageId });
}

/** What a HandledStore keeps about one handled message (by its `handledKey`). */
export interface HandledRecord {
  /** The SDK is done with it: handled, and a request's response accepted by the gateway. */
  done?: boolean;
  /** A request's signed response, saved before it is submitted: a redelivery sends it again. */
  response?: Record<string, unknown>;
  /** A request's result, recorded by its handler with its effect: a redelivery is answered with it. */
  result?: Record<string, unknown>;
}

/**
 * Where an agent records which deliveries it handled, so that a redelivery (after a crash, a lost
 * ack, a gateway restart) is acknowledged without running the handler again. The SDK asks `get`
 * before it runs a handler, and trusts the answer: any record means "handled".
 *
 * Exactly-once needs the record to be written **in the same transaction as the handler's own
 * effect** (the inbox pattern; Kafka's transactional consumers commit their offsets with their
 * output the same way): then a crash leaves both or neither, never an effect without its record.
 * `SqliteHandledStore` does this for a SQLite database the application owns; another database
 * implements these two methods over a table keyed by `handledKey` (sender and message-id), and the
 * handler writes that row in its transaction.
 */
export interface HandledStore {
  /** The record of the delivery `key` (`handledKey`), or undefined when it was never handled. */
  get(key: string): HandledRecord | undefined | Promise<HandledRecord | undefined>;
  /** Replaces the record of `key`; returns (or resolves) once a crash can no longer lose it. */
  record(key: string, record: HandledRecord): void | Promise<void>;
}

/** What SqliteHandledStore uses of a better-sqlite3 `Database` (the application's own connection). */
export interface SqliteConnection {
  prepare(sql: string): {
    run(...params: unknown[]): unknown;
    get(...params: unknown[]): unknown;
  };
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
}

export interface SqliteHandledStoreOptions {
  /**
   * How long a record is kept (default 8 days). Keep it at least the agent's `replayWindowMs`
   * (7 days and 5 minutes by default): an older redelivery is refused as stale before any handler.
   */
  retentionMs?: number;
}

const DEFAULT_RETENTION_MS = 8 * 24 * 3_600_000;
/** Expired records are deleted when the store opens and then every this many writes. */
const PRUNE_EVERY = 1_000;

interface Row {
  done: number;
  result: string | null;
  response: string | null;
}

/**
 * A HandledStore in a SQLite database the application owns (a better-sqlite3 `Database`), in the
 * table `acp_handled` (column `message_id`: the `handledKey`). The handler writes its effect and
 * `markHandled(ctx)` in one `db.transaction`:
 *
 * ```ts
 * const db = new Database("orders.db");
 * db.pragma("journal_mode = WAL");
 * const handled = new SqliteHandledStore(db);
 * const agent = new AcpAgent({ ...options, handledStore: handled });
 * agent.onNotification((body, ctx) =>
 *   db.transaction(() => {
 *     db.prepare("INSERT INTO orders (id, item) VALUES (?, ?)").run(body.orderId, body.item);
 *     handled.markHandled(ctx);
 *   })(),
 * );
 * ```
 */
export class SqliteHandledStore implements HandledStore {
  private readonly retentionMs: number;
  private readonly upsert: ReturnType<SqliteConnection["prepare"]>;
  private readonly select: ReturnType<SqliteConnection["prepare"]>;
  private readonly expire: ReturnType<SqliteConnection["prepare"]>;
  private writes = 0;

  constructor(
    private readonly db: SqliteConnection,
    options: SqliteHandledStoreOptions = {},
  ) {
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    if (!(Number.isFinite(this.retentionMs) && this.retentionMs > 0)) {
      throw new AcpError("InvalidParams", "SqliteHandledStore option retentionMs must be a positive number", {
        problems: [{ path: "/retentionMs", message: "must be a positive number of milliseconds" }],
      });
    }
    db.exec(`CREATE TABLE IF NOT EXISTS acp_handled (
      message_id TEXT PRIMARY KEY,
      handled_at INTEGER NOT NULL,
      done INTEGER NOT NULL DEFAULT 0,
      result TEXT,
      response TEXT
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS acp_handled_by_time ON acp_handled (handled_at);`);
    this.upsert = db.prepare(
      "INSERT OR REPLACE INTO acp_handled (message_id, handled_at, done, result, response) VALUES (?, ?, ?, ?, ?)",
    );
    this.select = db.prepare("SELECT done, result, response FROM acp_handled WHERE message_id = ?");
    this.expire = db.prepare("DELETE FROM acp_handled WHERE handled_at < ?");
    this.prune();
  }

  /**
   * Records `delivery` (the handler's context: its sender and message-id) handled, in the caller's
   * transaction: call it inside the `db.transaction` that writes the handler's effect. A request
   * handler may pass its result: if the process dies before the response is out, the redelivery is
   * answered with it instead of an error.
   */
  markHandled(delivery: HandledDelivery, result?: Record<string, unknown>): void {
    if (!this.db.inTransaction) {
      throw new AcpError(
        "InvalidParams",
        "markHandled must run inside the db.transaction that writes the handler's effect",
      );
    }
    this.record(handledKey(delivery), result === undefined ? {} : { result });
  }

  get(key: string): HandledRecord | undefined {
    const row = this.select.get(key) as Row | undefined;
    if (!row) return undefined;
    return {
      ...(row.done ? { done: true } : {}),
      ...(row.result !== null ? { result: JSON.parse(row.result) as Record<string, unknown> } : {}),
      ...(row.response !== null ? { response: JSON.parse(row.response) as Record<string, unknown> } : {}),
    };
  }

  record(key: string, record: HandledRecord): void {
    this.upsert.run(
      key,
      Date.now(),
      record.done ? 1 : 0,
      record.result === undefined ? null : JSON.stringify(record.result),
      record.response === undefined ? null : JSON.stringify(record.response),
    );
    if (++this.writes % PRUNE_EVERY === 0 && !this.db.inTransaction) this.prune();
  }

  /** Deletes the records older than the retention; returns how many. */
  prune(now = Date.now()): number {
    const result = this.expire.run(now - this.retentionMs) as { changes?: number };
    return result.changes ?? 0;
  }
}
