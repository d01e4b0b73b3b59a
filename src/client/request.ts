import { AcpError } from "../protocol/index.js";
import { errorFromObject, GatewayUnreachableError } from "./errors.js";

export interface GatewayRequest {
  /** Credential headers (`x-api-key`, or `authorization: Bearer …`). */
  headers: Record<string, string>;
  body?: unknown;
  signal?: AbortSignal;
}

function isStaleConnection(err: unknown): boolean {
  const code = (err as { cause?: { code?: string } }).cause?.code;
  return code === "UND_ERR_SOCKET" || code === "ECONNRESET";
}

/**
 * One JSON call to a gateway's REST API, and the one place that turns its answers into results or
 * errors: an unreachable gateway is GatewayUnreachableError (a GET on a pooled connection the
 * gateway closed is repeated once), an error answer is the gateway's own AcpError (code, message,
 * data, plus `httpStatus` and `retryAfterSeconds`), anything else unexpected is -32603 naming the
 * call. Every client of the REST API (SDK, collaboration, approvals, dashboard, MCP bridge) uses it.
 */
export async function requestGatewayJson(
  baseUrl: string,
  method: string,
  path: string,
  request: GatewayRequest,
): Promise<unknown> {
  const { body, signal } = request;
  let response: Response | undefined;
  for (let attempt = 1; response === undefined; attempt++) {
    try {
      response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          accept: "application/json",
          ...request.headers,
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (method === "GET" && attempt === 1 && isStaleConnection(err)) continue;
      throw new GatewayUnreachableError(baseUrl, err);
    }
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === "" ? {} : JSON.parse(text);
  } catch {
    throw new AcpError(
      "InternalError",
      `${method} ${path}: the gateway answered ${response.status} with non-JSON`,
      {
        httpStatus: response.status,
      },
    );
  }
  if (response.ok) return parsed;
  const error = (parsed as { error?: { code?: unknown; message?: unknown; data?: unknown } }).error;
  if (typeof error?.code === "number" && typeof error.message === "string") {
    const retryAfter = response.headers.get("retry-after");
    throw errorFromObject(
      { code: error.code, message: error.message, data: error.data },
      { httpStatus: response.status, ...(retryAfter ? { retryAfterSeconds: Number(retryAfter) } : {}) },
    );
  }
  throw new AcpError("InternalError", `${method} ${path}: the gateway answered ${response.status}`, {
    httpStatus: response.status,
  });
}
