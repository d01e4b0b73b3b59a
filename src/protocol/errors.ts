/**
 * The one table of ACP error codes. JSON-RPC's own codes where JSON-RPC defines the failure,
 * the implementation-defined range -32000..-32099 for ACP's. Codes are stable: never renumber,
 * only add. `docs/protocol.md` renders this table; `test/protocol/errors.test.ts` keeps them in step.
 */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,

  SignatureMissing: -32001,
  SignatureInvalid: -32002,
  UnknownKey: -32003,
  HandshakeRequired: -32004,
  Replay: -32005,
  StaleTimestamp: -32006,
  Misrouted: -32007,
  LayersDeclined: -32008,
  DecryptionFailed: -32009,
  Unauthorized: -32010,
  Forbidden: -32011,
  PayloadTooLarge: -32012,
  RateLimited: -32013,
  UnknownRecipient: -32014,
  NoCommonVersion: -32015,
  NotFound: -32016,
  Conflict: -32017,
  StorageUnavailable: -32018,
  Timeout: -32019,
  Cancelled: -32020,
  PermissionDenied: -32021,
  CapabilityMissing: -32022,
} as const;

export type ErrorCodeName = keyof typeof ErrorCode;
export type ErrorCodeValue = (typeof ErrorCode)[ErrorCodeName];

/** One-line meaning of each code, shown in docs and used as the default message. */
export const errorMeanings: Record<ErrorCodeName, string> = {
  ParseError: "the input is not valid JSON",
  InvalidRequest: "not a valid ACP JSON-RPC message (structure, id rules)",
  MethodNotFound: "no handler for this method",
  InvalidParams: "headers or body malformed or missing",
  InternalError: "the receiver failed while processing a valid message",
  SignatureMissing: "the message carries no signature",
  SignatureInvalid: "the signature does not verify (tampered bytes, wrong key, re-routed)",
  UnknownKey: "no registered public key for the signing agent and key id",
  HandshakeRequired: "the four-step handshake with this peer is not complete (or keys/layers changed)",
  Replay: "this message id was already seen within the replay window",
  StaleTimestamp: "the timestamp is outside the allowed clock-skew window",
  Misrouted: "the message is addressed to a different recipient",
  LayersDeclined: "the sender declares no skill layers (or too few) and is declined",
  DecryptionFailed: "the end-to-end encrypted body cannot be decrypted by this recipient",
  Unauthorized: "missing or invalid credentials",
  Forbidden: "the credentials do not allow this (e.g. signing as another agent)",
  PayloadTooLarge: "the envelope exceeds the size limit",
  RateLimited: "too many requests, or a quota reached (data.quota); retry after the indicated delay",
  UnknownRecipient: "no agent with this id is registered",
  NoCommonVersion: "the two agents share no protocol version",
  NotFound: "no such message or resource",
  Conflict: "the operation conflicts with the current state",
  StorageUnavailable: "the message cannot be persisted (disk full, read-only); nothing was accepted",
  Timeout: "no response within the allowed time",
  Cancelled: "the operation was cancelled",
  PermissionDenied: "the sender lacks the permission this command requires",
  CapabilityMissing: "the recipient did not announce a capability this requires",
};

const nameByCode = new Map<number, ErrorCodeName>(
  Object.entries(ErrorCode).map(([name, code]) => [code, name as ErrorCodeName]),
);

export function errorCodeName(code: number): ErrorCodeName | undefined {
  return nameByCode.get(code);
}

/** One thing wrong with a message, located by an RFC 6901 JSON Pointer into it. */
export interface Problem {
  path: string;
  message: string;
}

/** The `data` member of every ACP error object: a stable reason name plus what exactly was wrong. */
export interface AcpErrorData {
  reason: ErrorCodeName;
  problems?: Problem[];
  [key: string]: unknown;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** An ACP failure carrying its JSON-RPC error object. Thrown by validation, verification and the SDK. */
export class AcpError extends Error {
  readonly code: ErrorCodeValue;
  readonly data: AcpErrorData;

  constructor(reason: ErrorCodeName, message?: string, extra: Omit<AcpErrorData, "reason"> = {}) {
    super(message ?? errorMeanings[reason]);
    this.name = "AcpError";
    this.code = ErrorCode[reason];
    this.data = { reason, ...extra };
  }

  get reason(): ErrorCodeName {
    return this.data.reason;
  }

  toJSON(): JsonRpcErrorObject {
    return { code: this.code, message: this.message, data: this.data };
  }
}

/** Converts anything thrown into a JSON-RPC error object, never leaking a stack. */
export function toErrorObject(err: unknown): JsonRpcErrorObject {
  if (err instanceof AcpError) return err.toJSON();
  return {
    code: ErrorCode.InternalError,
    message: errorMeanings.InternalError,
    data: { reason: "InternalError" },
  };
}

/** Escapes one JSON Pointer reference token (RFC 6901 section 3). */
export function pointerToken(token: string | number): string {
  return String(token).replace(/~/g, "~0").replace(/\//g, "~1");
}

export function toPointer(path: readonly PropertyKey[]): string {
  return path.map((token) => `/${pointerToken(typeof token === "symbol" ? String(token) : token)}`).join("");
}
