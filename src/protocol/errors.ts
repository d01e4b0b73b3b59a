/** One row of the error table. */
export interface ErrorRow {
  /** The JSON-RPC `error.code`. */
  readonly code: number;
  /** The HTTP status of a REST answer whose body is this error (the JSON-RPC error object). */
  readonly status: number;
  /** One line: what the failure means. */
  readonly meaning: string;
}

/**
 * The one table of ACP errors: one row per kind, with its JSON-RPC code, the HTTP status a REST
 * answer carrying it gets, and its one-line meaning (the default message, and what the docs show).
 * JSON-RPC's own codes where JSON-RPC defines the failure, the implementation-defined range
 * -32000..-32099 for ACP's. Codes are stable: never renumber, only add. A row without a status or
 * a meaning does not compile. `docs/protocol.md` renders this table; `test/protocol/errors.test.ts`
 * keeps them in step.
 */
// biome-ignore format: one row per code, aligned like the table it is
export const errorTable = {
  ParseError:         { code: -32700, status: 400, meaning: "the input is not valid JSON" },
  InvalidRequest:     { code: -32600, status: 400, meaning: "not a valid ACP JSON-RPC message (structure, id rules)" },
  MethodNotFound:     { code: -32601, status: 404, meaning: "no handler for this method" },
  InvalidParams:      { code: -32602, status: 400, meaning: "headers or body malformed or missing" },
  InternalError:      { code: -32603, status: 500, meaning: "the receiver failed while processing a valid message" },

  SignatureMissing:   { code: -32001, status: 400, meaning: "the message carries no signature" },
  SignatureInvalid:   { code: -32002, status: 401, meaning: "the signature does not verify (tampered bytes, wrong key, re-routed)" },
  UnknownKey:         { code: -32003, status: 401, meaning: "no registered public key for the signing agent and key id" },
  HandshakeRequired:  { code: -32004, status: 409, meaning: "the four-step handshake with this peer is not complete (or keys/layers changed)" },
  Replay:             { code: -32005, status: 409, meaning: "this message id was already seen within the replay window" },
  StaleTimestamp:     { code: -32006, status: 400, meaning: "the timestamp is outside the allowed clock-skew window" },
  Misrouted:          { code: -32007, status: 400, meaning: "the message is addressed to a different recipient" },
  LayersDeclined:     { code: -32008, status: 403, meaning: "the sender declares no skill layers (or too few) and is declined" },
  DecryptionFailed:   { code: -32009, status: 400, meaning: "the end-to-end encrypted body cannot be decrypted by this recipient" },
  Unauthorized:       { code: -32010, status: 401, meaning: "missing or invalid credentials" },
  Forbidden:          { code: -32011, status: 403, meaning: "the credentials do not allow this (e.g. signing as another agent)" },
  PayloadTooLarge:    { code: -32012, status: 413, meaning: "the envelope exceeds the size limit" },
  RateLimited:        { code: -32013, status: 429, meaning: "too many requests, or a quota reached (data.quota); retry after the indicated delay" },
  UnknownRecipient:   { code: -32014, status: 404, meaning: "no agent with this id is registered" },
  NoCommonVersion:    { code: -32015, status: 400, meaning: "the two agents share no protocol version" },
  NotFound:           { code: -32016, status: 404, meaning: "no such message or resource" },
  Conflict:           { code: -32017, status: 409, meaning: "the operation conflicts with the current state" },
  StorageUnavailable: { code: -32018, status: 503, meaning: "the message cannot be persisted (disk full, read-only); nothing was accepted" },
  Timeout:            { code: -32019, status: 504, meaning: "no response within the allowed time" },
  Cancelled:          { code: -32020, status: 499, meaning: "the operation was cancelled" },
  PermissionDenied:   { code: -32021, status: 403, meaning: "the sender lacks the permission this command requires" },
  CapabilityMissing:  { code: -32022, status: 422, meaning: "the recipient did not announce a capability this requires" },
} as const satisfies Record<string, ErrorRow>;

/** A failure's kind: the name of its row, sent as `error.data.reason`. */
export type ErrorCodeName = keyof typeof errorTable;
export type ErrorCodeValue = (typeof errorTable)[ErrorCodeName]["code"];

const kinds = Object.keys(errorTable) as ErrorCodeName[];

/** The JSON-RPC code of each kind (`ErrorCode.InvalidParams` is -32602): the table's `code` column. */
export const ErrorCode = Object.fromEntries(kinds.map((kind) => [kind, errorTable[kind].code])) as {
  readonly [K in ErrorCodeName]: (typeof errorTable)[K]["code"];
};

/** One-line meaning of each kind: the table's `meaning` column. */
export const errorMeanings = Object.fromEntries(kinds.map((kind) => [kind, errorTable[kind].meaning])) as {
  readonly [K in ErrorCodeName]: string;
};

const nameByCode = new Map<number, ErrorCodeName>(
  Object.entries(ErrorCode).map(([name, code]) => [code, name as ErrorCodeName]),
);

/** The name of an ACP error code (`-32602` → `InvalidParams`); undefined for a code ACP does not define. */
export function errorCodeName(code: number): ErrorCodeName | undefined {
  return nameByCode.get(code);
}

/** One thing wrong with a message, located by an RFC 6901 JSON Pointer into it. */
export interface Problem {
  path: string;
  message: string;
}

/**
 * The `data` member of every ACP error object: the failure's kind (`reason` on the wire, where the
 * protocol documents name it; `kind` on the error classes, as on every error class of acp-kit) plus
 * what exactly was wrong.
 */
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

/**
 * An ACP failure carrying its JSON-RPC error object: what a peer or the gateway answers, or will be
 * answered. Thrown by validation, verification, the gateway and the SDK.
 */
export class AcpError extends Error {
  readonly code: ErrorCodeValue;
  readonly data: AcpErrorData;

  constructor(kind: ErrorCodeName, message?: string, extra: Omit<AcpErrorData, "reason"> = {}) {
    super(message ?? errorTable[kind].meaning);
    this.name = "AcpError";
    this.code = errorTable[kind].code;
    this.data = { reason: kind, ...extra };
  }

  /** The failure's kind, e.g. `"NotFound"` (the wire's `error.data.reason`). */
  get kind(): ErrorCodeName {
    return this.data.reason;
  }

  /** @deprecated The failure's kind is `kind`; `reason` is its former name (the wire keeps `data.reason`). */
  get reason(): ErrorCodeName {
    return this.kind;
  }

  /** The HTTP status of a REST answer carrying this error. */
  get httpStatus(): number {
    return errorTable[this.kind].status;
  }

  /** The JSON-RPC error object (`code`, `message`, `data`) this error is sent as. */
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

/** A schema issue as zod and Standard Schema report it: a message and where in the value. */
export interface IssueLike {
  readonly message: string;
  readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[] | undefined;
}

/**
 * Schema issues as ACP problems, each located by a JSON Pointer under `base` (e.g. `/params/body`).
 * Takes a `ZodError` (or anything with `issues`) or the issues themselves.
 */
export function problemsOf(
  issues: { readonly issues: readonly IssueLike[] } | readonly IssueLike[],
  base = "",
): Problem[] {
  const list: readonly IssueLike[] = "issues" in issues ? issues.issues : issues;
  return list.map((issue) => ({
    path: base + toPointer((issue.path ?? []).map((part) => (typeof part === "object" ? part.key : part))),
    message: issue.message,
  }));
}

/** Escapes one JSON Pointer reference token (RFC 6901 section 3). */
export function pointerToken(token: string | number): string {
  return String(token).replace(/~/g, "~0").replace(/\//g, "~1");
}

export function toPointer(path: readonly PropertyKey[]): string {
  return path.map((token) => `/${pointerToken(typeof token === "symbol" ? String(token) : token)}`).join("");
}
