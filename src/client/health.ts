import { AcpError } from "../protocol/index.js";
import { GatewayUnreachableError } from "./errors.js";

/** The agent's `degraded` event: the gateway or its broker fails, and the SDK works around it. */
export interface DegradedInfo {
  /** The first failure, for people (e.g. "JetStream answered 503"). */
  reason: string;
  /** Its JSON-RPC code, when the gateway answered one. */
  code?: number;
  /** When it started (ISO 8601). */
  since: string;
}

/** The agent's `recovered` event: the gateway has worked again, without a failure, for a while. */
export interface RecoveredInfo {
  /** How long the agent was degraded. */
  degradedMs: number;
  /** The failures the SDK worked around meanwhile (resends, redeliveries to come). */
  failures: number;
}

/**
 * How long the gateway must work without a failure before the agent reads as recovered. Longer
 * than a broker write's own timeout (5 s, as JetStream clients wait for a publish acknowledgement):
 * a write made during the trouble can still be reported failed that long after it ended.
 */
export const RECOVERY_QUIET_MS = 6_000;

/**
 * A failure at the gateway that the SDK repairs by itself, so the application has nothing to do: a
 * settlement (ack, reject, working) the broker did not take (the redelivery repairs it), a
 * submission refused 503 (sent again), a registry lookup that could not be made (the delivery
 * comes again), a response whose submission did not settle (sent again on the redelivery).
 */
export function isGatewayTrouble(err: unknown): boolean {
  if (err instanceof GatewayUnreachableError) return true;
  if (!(err instanceof AcpError)) return false;
  if (typeof err.data.mayHaveBeenAccepted === "boolean") return true;
  const status = err.data.httpStatus;
  if (typeof status === "number" && status >= 500) return true;
  return err.kind === "StorageUnavailable" || err.kind === "InternalError" || err.kind === "Timeout";
}

/**
 * Whether the agent's gateway works, as the agent sees it: the first failure the SDK works around
 * makes it `degraded` (one event, however many failures follow), and it is `recovered` once the
 * gateway worked (a submission accepted, a delivery) with no failure for RECOVERY_QUIET_MS. So a
 * NATS stream-leader election, with its dozens of refused writes and acknowledgements, reads as one
 * pair of events, and `error` is left for what the application must act on.
 */
export class GatewayHealth {
  private degradedAt: number | undefined;
  private failures = 0;
  private lastFailure = 0;
  private lastSuccess = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly events: {
      degraded(info: DegradedInfo): void;
      recovered(info: RecoveredInfo): void;
    },
    private readonly quietMs = RECOVERY_QUIET_MS,
  ) {}

  get isDegraded(): boolean {
    return this.degradedAt !== undefined;
  }

  failed(err: Error): void {
    const now = Date.now();
    this.lastFailure = now;
    this.failures++;
    if (this.degradedAt !== undefined) return;
    this.degradedAt = now;
    this.failures = 1;
    this.events.degraded({
      reason: err.message,
      ...(err instanceof AcpError ? { code: err.code } : {}),
      since: new Date(now).toISOString(),
    });
  }

  succeeded(): void {
    this.lastSuccess = Date.now();
    if (this.degradedAt !== undefined && this.timer === undefined) this.check();
  }

  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Recovered when a success came after the last failure, and that failure is quietMs old. */
  private check(): void {
    this.timer = undefined;
    if (this.degradedAt === undefined || this.lastSuccess < this.lastFailure) return; // the next success asks again
    const quietFor = Date.now() - this.lastFailure;
    if (quietFor < this.quietMs) {
      this.timer = setTimeout(() => this.check(), this.quietMs - quietFor);
      this.timer.unref();
      return;
    }
    const info = { degradedMs: Date.now() - this.degradedAt, failures: this.failures };
    this.degradedAt = undefined;
    this.failures = 0;
    this.events.recovered(info);
  }
}
