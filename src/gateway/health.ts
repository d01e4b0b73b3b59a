import type { ServerResponse } from "node:http";
import type { Broker } from "../broker/index.js";
import { sendJson } from "../http/server.js";

/** The body of `GET /healthz` (docs/gateway.md, "Health"). */
export interface HealthReport {
  /** `degraded` (HTTP 503) while the broker cannot store or reach its store; `ok` (200) otherwise. */
  status: "ok" | "degraded";
  broker: Broker["kind"];
  /** The broker's parts, one line each, and `since` while degraded (BrokerHealth.detail). */
  detail: Record<string, string>;
  /**
   * Problems that do not stop relaying: `audit` (relay audit appends failing) and its `since`;
   * `storage` while free storage is below its floor (new messages refused, deliveries go on).
   */
  warnings?: Record<string, string>;
}

/** errno codes an append meets on a full or broken disk, for people. */
const FILE_ERRORS: Record<string, string> = {
  ENOSPC: "disk full",
  EDQUOT: "disk quota exceeded",
  EFBIG: "file too large",
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EIO: "I/O error",
};

/**
 * What `GET /healthz` answers, for load balancers and `acp mcp --gateway`: the broker's health,
 * plus the relay audit log as a warning.
 *
 * A failing audit log is a warning, not `degraded`: the gateway still stores and delivers every
 * message (the audit is written after the message is stored and never un-accepts it, see
 * RelayAudit), so taking the gateway out of service would turn an audit problem into an outage.
 * It is counted in `acp_audit_errors_total` for alerting and shown here until that sender's log
 * takes an append again. Each sender has its own log, so failures are kept per sender: one log
 * that works again does not hide another that still fails.
 */
export class GatewayHealth {
  /** Sender → when its log began failing. */
  private readonly failingAuditLogs = new Map<string, number>();
  private lastAuditFailure = "";

  constructor(
    private readonly broker: Broker,
    /** Below its floor, new messages are refused: a warning (deliveries go on). */
    private readonly storage?: { warning(): string | undefined },
  ) {}

  auditFailed(sender: string, error: unknown): void {
    if (!this.failingAuditLogs.has(sender)) this.failingAuditLogs.set(sender, Date.now());
    this.lastAuditFailure = describeFileError(error);
  }

  auditAppended(sender: string): void {
    this.failingAuditLogs.delete(sender);
  }

  async report(): Promise<HealthReport> {
    const health = await this.broker.health().catch((error: unknown) => ({
      ok: false,
      detail: { broker: `health check failed: ${error instanceof Error ? error.message : String(error)}` },
    }));
    const report: HealthReport = {
      status: health.ok ? "ok" : "degraded",
      broker: this.broker.kind,
      detail: health.detail,
    };
    const warnings = { ...this.auditWarning() };
    const storage = this.storage?.warning();
    if (storage) warnings.storage = storage;
    if (Object.keys(warnings).length > 0) report.warnings = warnings;
    return report;
  }

  async respond(res: ServerResponse): Promise<void> {
    const report = await this.report();
    sendJson(res, report.status === "ok" ? 200 : 503, report);
  }

  /** Names no agent and no path: /healthz is public. The gateway's log has the full error. */
  private auditWarning(): Record<string, string> | undefined {
    const count = this.failingAuditLogs.size;
    if (count === 0) return undefined;
    const logs = count === 1 ? "1 sender's relay audit log" : `${count} senders' relay audit logs`;
    return {
      audit: `appends failing for ${logs}: ${this.lastAuditFailure}; see the gateway log`,
      since: new Date(Math.min(...this.failingAuditLogs.values())).toISOString(),
    };
  }
}

function describeFileError(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return `${FILE_ERRORS[code] ?? "file error"} (${code})`;
  return error instanceof Error ? error.name : "unknown error";
}
