/**
 * How the gateway's MCP endpoint reaches the gateway it runs in: its bridge agent (agents/run)
 * connects to it over the WebSocket like any agent, so the relay's rules apply to its messages.
 */
import type { IncomingMessage } from "node:http";
import { TLSSocket } from "node:tls";

/**
 * The base URL by which this process reaches the gateway: over plain HTTP the loopback address of
 * the socket the request came in on; over TLS the Host the client used (the certificate names it).
 */
export function selfUrlOf(req: IncomingMessage): string {
  if (req.socket instanceof TLSSocket) return `https://${req.headers.host ?? "localhost"}`;
  const address = (req.socket.localAddress ?? "127.0.0.1").replace(/^::ffff:/, "");
  return `http://${address.includes(":") ? `[${address}]` : address}:${req.socket.localPort}`;
}
