import { AcpError, type ErrorCodeName } from "../protocol/index.js";
import type { QuotaName } from "./types.js";

/**
 * Every failure the broker reports on purpose. `brokerToAcp` maps each to the ACP error clients see
 * (and so to its HTTP status, from the error table).
 */
export type BrokerErrorKind =
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

/**
 * What a broker refuses or fails with, either driver alike: `kind` says why (`not_found`, `quota`,
 * `conflict`, …), `brokerToAcp` turns it into the AcpError a client sees.
 */
export class BrokerError extends Error {
  override readonly name = "BrokerError";
  /** The failure's kind, e.g. `"not_found"`. */
  readonly kind: BrokerErrorKind;
  /** The input field at fault, for invalid_argument. */
  readonly field: string | undefined;
  /** The quota hit, for `quota`. */
  readonly quota: QuotaExceeded | undefined;

  constructor(
    kind: BrokerErrorKind,
    message: string,
    options: { field?: string; cause?: unknown; quota?: QuotaExceeded } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.field = options.field;
    this.quota = options.quota;
  }

  /** @deprecated The failure's kind is `kind`; `code` is its former name. */
  get code(): BrokerErrorKind {
    return this.kind;
  }
}

/** @deprecated The former name of `BrokerErrorKind`. */
export type BrokerErrorCode = BrokerErrorKind;

/** True for a BrokerError, of one of `kinds` when any are named. */
export function isBrokerError(error: unknown, ...kinds: BrokerErrorKind[]): error is BrokerError {
  return error instanceof BrokerError && (kinds.length === 0 || kinds.includes(error.kind));
}

/** A compare-and-set that lost: `create` found the key, or `update` found another revision. */
export function isWriteConflict(error: unknown): error is BrokerError {
  return isBrokerError(error, "exists", "conflict");
}

/** What a quota refusal (-32013) tells the sender to wait before trying again. */
export const QUOTA_RETRY_AFTER_SECONDS = 30;

/** The ACP error each broker error becomes (a Record, so a new broker kind cannot go unmapped). */
const ACP_KIND_OF: Record<BrokerErrorKind, ErrorCodeName> = {
  invalid_argument: "InvalidParams",
  not_found: "NotFound",
  forbidden: "Forbidden",
  conflict: "Conflict",
  exists: "Conflict",
  invalid_state: "Conflict",
  unavailable: "StorageUnavailable",
  closed: "StorageUnavailable",
  // Room comes back as the recipient reads (or retention passes): worth trying again later.
  quota: "RateLimited",
};

/** A broker error as the ACP error clients see, with a stable code; anything else is returned as is. */
export function brokerToAcp(err: unknown): unknown {
  if (!(err instanceof BrokerError)) return err;
  const extra = err.kind === "quota" ? { ...err.quota, retryAfterSeconds: QUOTA_RETRY_AFTER_SECONDS } : {};
  return new AcpError(ACP_KIND_OF[err.kind], err.message, extra);
}

/**
 * The refusal of a settlement by someone other than the recipient: the sender learns that only the
 * recipient settles; anyone else is told what a message that does not exist would tell.
 */
export function notRecipient(from: string, id: string, agentId: string): BrokerError {
  return agentId === from
    ? new BrokerError("forbidden", `only the recipient settles message ${id}; ${agentId} sent it`)
    : new BrokerError("not_found", `no message ${id}`);
}
