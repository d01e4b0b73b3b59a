import type { QuotaName } from "./types.js";

/**
 * Every failure the broker reports on purpose. The gateway maps codes to HTTP and JSON-RPC errors:
 * invalid_argument → InvalidParams/400, not_found → NotFound/404, forbidden → Forbidden/403,
 * conflict and exists → Conflict/409, invalid_state → Conflict/409, unavailable → StorageUnavailable/503,
 * quota → RateLimited/429.
 */
export type BrokerErrorCode =
  | "invalid_argument"
  | "not_found"
  | "forbidden"
  | "conflict"
  | "exists"
  | "invalid_state"
  | "unavailable"
  | "closed"
  | "quota";

/** Which quota a `quota` refusal hit, its limit, and what was in use before this message. */
export interface QuotaExceeded {
  quota: QuotaName;
  limit: number;
  used: number;
}

export class BrokerError extends Error {
  override readonly name = "BrokerError";
  readonly code: BrokerErrorCode;
  /** The input field at fault, for invalid_argument. */
  readonly field: string | undefined;
  /** The quota hit, for `quota`. */
  readonly quota: QuotaExceeded | undefined;

  constructor(
    code: BrokerErrorCode,
    message: string,
    options: { field?: string; cause?: unknown; quota?: QuotaExceeded } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.field = options.field;
    this.quota = options.quota;
  }
}

export function isBrokerError(error: unknown, code?: BrokerErrorCode): error is BrokerError {
  return error instanceof BrokerError && (code === undefined || error.code === code);
}
