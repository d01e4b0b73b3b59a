/**
 * How the gateway's MCP endpoint reaches the gateway it runs in: the bridge agent connects to it
 * like any agent, and the task tools call the collaboration REST API with the MCP caller's own API
 * key, so every rule, check and audit of those endpoints applies unchanged.
 */
import type { IncomingMessage } from "node:http";
import { TLSSocket } from "node:tls";
import { requestGatewayJson } from "../../client/request.js";
import { AcpError } from "../../protocol/index.js";

/**
 * The base URL by which this process reaches the gateway: over plain HTTP the loopback address of
 * the socket the request came in on; over TLS the Host the client used (the certificate names it).
 */
export function selfUrlOf(req: IncomingMessage): string {
  if (req.socket instanceof TLSSocket) return `https://${req.headers.host ?? "localhost"}`;
  const address = (req.socket.localAddress ?? "127.0.0.1").replace(/^::ffff:/, "");
  return `http://${address.includes(":") ? `[${address}]` : address}:${req.socket.localPort}`;
}

/** A REST call to the gateway as the agent whose key is given; a non-2xx answer throws the gateway's AcpError. */
export async function callGateway<T>(
  baseUrl: string,
  apiKey: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  return (await requestGatewayJson(baseUrl, method, path, {
    headers: { "x-api-key": apiKey },
    ...(body !== undefined ? { body } : {}),
  })) as T;
}

/** True for the gateway's "not found" answer (404), whatever the code it carried. */
export function isNotFound(err: unknown): boolean {
  return err instanceof AcpError && err.data.httpStatus === 404;
}
