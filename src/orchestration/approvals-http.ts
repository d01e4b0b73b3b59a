import { GatewayUnreachableError } from "../client/index.js";
import { normaliseGatewayUrl } from "../client/http.js";
import { requestGatewayJson } from "../client/request.js";
import { AcpError } from "../protocol/index.js";
import { DASHBOARD_API } from "../wire/api.js";
import { camelCased } from "../wire/deprecated-names.js";
import {
  type ApprovalDecision,
  type ApprovalFilter,
  ApprovalRecord,
  type ApprovalStore,
  type NewApproval,
} from "./approvals.js";
import { sleep } from "./retry.js";

export const APPROVALS_PATH = "/api/v1/approvals";
/** The approvals a principal decides, with its principal token (the dashboard's and the CLI's). */
export const PRINCIPAL_APPROVALS_PATH = `${DASHBOARD_API}/approvals`;
/** Each long-poll asks the gateway to hold the request this long (it caps it at 30 s). */
const LONG_POLL_SECONDS = 25;
const RETRY_MS = 1000;

function isTransient(err: unknown): boolean {
  if (err instanceof GatewayUnreachableError) return true;
  if (!(err instanceof AcpError)) return false;
  const status = err.data.httpStatus;
  return err.kind === "StorageUnavailable" || (typeof status === "number" && status >= 500);
}

const ACTION: Record<ApprovalDecision["decision"], string> = {
  approved: "approve",
  denied: "deny",
  cancelled: "cancel",
};

/**
 * The gateway's approval API (`/api/v1/approvals`) as an ApprovalStore, for an orchestrator in
 * another process (with its agent's API key: it creates, reads, waits for and cancels its own
 * approvals) and for `acp approvals` (with the admin token: lists and decides). The gateway keeps
 * the records in its broker's KV; waiting is a long poll, so a decision arrives within moments.
 */
export class HttpApprovalStore implements ApprovalStore {
  private readonly baseUrl: string;
  private readonly credential: string;

  /** `credential`: an agent's API key or the gateway's admin token (sent as a Bearer token). */
  constructor(options: { gateway: string; credential: string }) {
    this.baseUrl = normaliseGatewayUrl(options.gateway);
    this.credential = options.credential;
  }

  /** The gateway sets `requestedBy` and `principal` from the caller's API key; the input's are ignored. */
  async create(input: NewApproval): Promise<ApprovalRecord> {
    const body = {
      command: input.command,
      fallbacks: input.fallbacks,
      reason: input.reason,
      timeout_ms: input.timeoutMs,
    };
    return ApprovalRecord.parse(await this.call("POST", APPROVALS_PATH, body));
  }

  async get(id: string): Promise<ApprovalRecord | null> {
    try {
      return ApprovalRecord.parse(await this.call("GET", `${APPROVALS_PATH}/${encodeURIComponent(id)}`));
    } catch (err) {
      if (err instanceof AcpError && err.kind === "NotFound") return null;
      throw err;
    }
  }

  async list(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
    const params = new URLSearchParams();
    if (filter.status) params.set("status", filter.status);
    if (filter.requestedBy) params.set("requested_by", filter.requestedBy);
    const query = params.size > 0 ? `?${params}` : "";
    const page = (await this.call("GET", `${APPROVALS_PATH}${query}`)) as { approvals: unknown[] };
    return page.approvals.map((record) => ApprovalRecord.parse(record));
  }

  async decide(id: string, decision: ApprovalDecision): Promise<ApprovalRecord> {
    const path = `${APPROVALS_PATH}/${encodeURIComponent(id)}/${ACTION[decision.decision]}`;
    const body = { by: decision.by, ...(decision.note !== undefined ? { note: decision.note } : {}) };
    return ApprovalRecord.parse(await this.call("POST", path, body));
  }

  /**
   * Long polls until decided. A gateway that restarts meanwhile is waited for (the approval is
   * persisted there): transport failures are retried every second until the approval's expiry.
   */
  async waitForDecision(id: string, signal?: AbortSignal): Promise<ApprovalRecord> {
    let expiresAt: number | undefined;
    for (;;) {
      try {
        const path = `${APPROVALS_PATH}/${encodeURIComponent(id)}?wait=${LONG_POLL_SECONDS}`;
        const record = ApprovalRecord.parse(await this.call("GET", path, undefined, signal));
        if (record.status !== "pending") return record;
        expiresAt = Date.parse(record.expiresAt);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (!isTransient(err) || expiresAt === undefined || Date.now() > expiresAt + RETRY_MS) throw err;
        await sleep(RETRY_MS, signal);
      }
    }
  }

  async close(): Promise<void> {}

  /** The answer under the TypeScript names (the API's are snake_case). */
  private async call(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const answer = await requestGatewayJson(this.baseUrl, method, path, {
      headers: { authorization: `Bearer ${this.credential}` },
      ...(body !== undefined ? { body } : {}),
      ...(signal ? { signal } : {}),
    });
    return camelCased(answer);
  }
}

/**
 * The approvals a human principal decides (`/api/v1/dashboard/approvals`), with its principal
 * token: those asked of it and those its agents asked. The gateway records the decision as
 * `principal:<id>`, so a decision names no one else. `acp approvals --principal-token` uses it.
 */
export class PrincipalApprovalClient implements Pick<ApprovalStore, "get" | "list" | "decide" | "close"> {
  private readonly baseUrl: string;

  constructor(private readonly options: { gateway: string; principalToken: string }) {
    this.baseUrl = normaliseGatewayUrl(options.gateway);
  }

  async get(id: string): Promise<ApprovalRecord | null> {
    try {
      return ApprovalRecord.parse(await this.call("GET", `/${encodeURIComponent(id)}`));
    } catch (err) {
      if (err instanceof AcpError && err.kind === "NotFound") return null;
      throw err;
    }
  }

  /** Oldest first, as every ApprovalStore lists (the dashboard's API answers newest first). */
  async list(filter: Pick<ApprovalFilter, "status"> = {}): Promise<ApprovalRecord[]> {
    const query = filter.status ? `?status=${encodeURIComponent(filter.status)}` : "";
    const page = (await this.call("GET", query)) as { approvals: unknown[] };
    return page.approvals.map((record) => ApprovalRecord.parse(record)).reverse();
  }

  /** `decision.by` is not sent: the gateway names the principal the token belongs to. */
  async decide(id: string, decision: ApprovalDecision): Promise<ApprovalRecord> {
    if (decision.decision === "cancelled") {
      throw new AcpError("Forbidden", "a principal approves or denies; only the requester cancels");
    }
    const path = `/${encodeURIComponent(id)}/${ACTION[decision.decision]}`;
    const body = decision.note !== undefined ? { note: decision.note } : {};
    return ApprovalRecord.parse(await this.call("POST", path, body));
  }

  async close(): Promise<void> {}

  /** The answer under the TypeScript names (the API's are snake_case). */
  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    const answer = await requestGatewayJson(this.baseUrl, method, `${PRINCIPAL_APPROVALS_PATH}${path}`, {
      headers: { authorization: `Bearer ${this.options.principalToken}` },
      ...(body !== undefined ? { body } : {}),
    });
    return camelCased(answer);
  }
}
