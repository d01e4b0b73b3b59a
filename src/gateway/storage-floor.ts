import type { Logger } from "pino";
import type { Broker } from "../broker/index.js";
import { AcpError } from "../protocol/index.js";
import type { Metrics } from "./metrics.js";

const POLL_MS = 2_000;
/** What a refusal tells the sender to wait: space comes back when an operator frees it, or retention does. */
const RETRY_AFTER_SECONDS = 30;

/**
 * A gateway-wide floor of free storage. Below it the relay refuses new submissions (-32018
 * StorageUnavailable, `data.quota` "storage-free-floor"), so a disk filling up stops at the floor
 * instead of at zero, where SQLite (or JetStream) would fail every write: acknowledgements, the
 * delivery bookkeeping and registrations keep working, since only new messages are refused.
 *
 * -32018 rather than -32013: nothing the sender did is at fault and every sender is refused alike;
 * the code already means "cannot be persisted now, nothing was accepted, try again", which is what
 * the SDK does (with backoff), and it answers 503, which tells a client (not a load balancer: the
 * health check stays 200, deliveries go on) that the service, not the caller, is short.
 *
 * The room is the broker's `storageRoom()` (embedded: statfs of the data directory; NATS: the
 * JetStream account's limit less its usage), read every 2 s, so the per-message check is a
 * comparison. On NATS without an account storage limit the room is unknown and no floor applies.
 */
export class StorageFloor {
  #room: number | null = null;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly broker: Broker,
    readonly floorBytes: number,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {}

  /** The last room read (bytes), or null when the broker cannot tell. */
  get room(): number | null {
    return this.#room;
  }

  get below(): boolean {
    return this.#room !== null && this.#room < this.floorBytes;
  }

  async start(): Promise<void> {
    if (this.floorBytes <= 0) return;
    await this.#poll();
    if (this.#room === null) {
      this.logger.warn(
        "the JetStream account has no storage limit: the free-storage floor cannot apply; give the account a max_file limit (docs/security.md, Quotas)",
      );
    }
    this.#timer = setInterval(() => void this.#poll(), POLL_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Throws StorageUnavailable while the room is below the floor. */
  check(): void {
    if (!this.below) return;
    throw new AcpError(
      "StorageUnavailable",
      `the gateway's storage is nearly full (${this.#room} bytes free, below its floor of ${this.floorBytes}): new messages are refused until space is freed; deliveries and acknowledgements go on`,
      {
        quota: "storage-free-floor",
        limit: this.floorBytes,
        free: this.#room,
        retryAfterSeconds: RETRY_AFTER_SECONDS,
      },
    );
  }

  /** One line for /healthz while below the floor (a warning: deliveries go on). Public: no figures. */
  warning(): string | undefined {
    if (!this.below) return undefined;
    return "new messages refused: free storage is below its floor; deliveries go on (see the gateway log)";
  }

  async #poll(): Promise<void> {
    try {
      const room = await this.broker.storageRoom();
      const wasBelow = this.below;
      this.#room = room;
      if (this.below !== wasBelow) {
        if (this.below)
          this.logger.error(
            { free: room, floor: this.floorBytes },
            "storage below its floor: new messages refused",
          );
        else
          this.logger.info(
            { free: room, floor: this.floorBytes },
            "storage above its floor again: new messages accepted",
          );
      }
      if (room !== null) this.metrics.gauge("acp_storage_free_bytes", room);
    } catch {
      // Broker unreachable: its health says so; keep the last reading.
    }
  }
}
