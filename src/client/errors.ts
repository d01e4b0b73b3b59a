import { AcpError, type AcpErrorData, errorCodeName } from "../protocol/index.js";

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Rebuilds an AcpError from a JSON-RPC error object that came over the wire (a gateway rejection or a
 * peer's signed error response), keeping its code and data. A code outside ACP's table (a foreign
 * peer's own code) becomes InternalError with the original in `data.remoteCode`, so nothing is lost.
 */
export function errorFromObject(
  error: { code: number; message: string; data?: unknown },
  extra: Record<string, unknown> = {},
): AcpError {
  const reason = errorCodeName(error.code);
  const { reason: _reason, headers: _headers, ...data } = isRecord(error.data) ? error.data : {};
  return new AcpError(reason ?? "InternalError", error.message, {
    ...(data as Omit<AcpErrorData, "reason">),
    ...extra,
    ...(reason === undefined ? { remoteCode: error.code } : {}),
  });
}

/** The gateway could not be reached at all (refused, DNS, TLS): distinct from a gateway's answer. */
export class GatewayUnreachableError extends Error {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    const nested = (cause as { cause?: { code?: string; message?: string } } | undefined)?.cause;
    super(`cannot reach the gateway at ${url} (${nested?.code ?? nested?.message ?? String(cause)})`, {
      cause,
    });
    this.name = "GatewayUnreachableError";
  }
}

/**
 * What kind of misuse an `SdkError` reports: `NotConnected` (a method that needs `connect()` first),
 * `AlreadyConnected` (`connect()` called twice), `AlreadyRegistered` (a second handler or agent
 * under one name).
 */
export type SdkErrorKind = "NotConnected" | "AlreadyConnected" | "AlreadyRegistered";

/**
 * A programming mistake in the code using the SDK, found locally: never sent to a peer or the
 * gateway, so it has no JSON-RPC code. What a peer or the gateway refuses is an `AcpError`.
 */
export class SdkError extends Error {
  override readonly name = "SdkError";

  constructor(
    readonly kind: SdkErrorKind,
    message: string,
  ) {
    super(message);
  }
}
