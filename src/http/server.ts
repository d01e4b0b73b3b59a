import { readFileSync } from "node:fs";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Socket } from "node:net";
import { AcpError, toErrorObject } from "../protocol/index.js";

/** Answers with `body` as JSON (no-store), with `status` and any extra headers. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...headers,
  });
  res.end(text);
}

/**
 * Every rejection is a JSON-RPC error response body with its code's HTTP status; anything but an
 * AcpError is a 500 that names nothing. (The gateway turns its broker's errors into AcpErrors first.)
 */
export function sendError(res: ServerResponse, err: unknown): void {
  const error = toErrorObject(err);
  const status = err instanceof AcpError ? err.httpStatus : 500;
  const headers: Record<string, string> = {};
  if (err instanceof AcpError && typeof err.data.retryAfterSeconds === "number") {
    headers["retry-after"] = String(err.data.retryAfterSeconds);
  }
  if (status === 401) {
    // An endpoint may name its own challenge (the MCP endpoint adds its RFC 9728 metadata URL).
    const challenge = (err as { challenge?: unknown }).challenge;
    headers["www-authenticate"] = typeof challenge === "string" ? challenge : 'Bearer realm="acp"';
  }
  sendJson(res, status, { jsonrpc: "2.0", error, id: null }, headers);
}

/**
 * Reads the whole request body, refusing more than `limit` bytes as soon as it is exceeded
 * (Content-Length up front, or while streaming), without buffering the excess.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners("data");
        req.resume();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

export function tooLarge(limit: number): AcpError {
  return new AcpError("PayloadTooLarge", `the body exceeds the ${limit}-byte limit`, { limit });
}

/**
 * Reads a request's JSON body, refusing one over `limit` bytes (PayloadTooLarge), not JSON (ParseError) or
 * nested too deep, each as an AcpError naming what was wrong.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const body = await readBody(req, limit);
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new AcpError("ParseError", "the request body is not valid JSON", {
      problems: [{ path: "", message: (err as Error).message }],
    });
  }
  refuseDeepNesting(value, "request body");
  return value;
}

/** Deeper JSON is refused before any recursive code (JCS canonicalization, JSON.stringify) sees it. */
export const MAX_JSON_DEPTH = 256;

/**
 * Refuses a parsed JSON value nesting objects/arrays deeper than MAX_JSON_DEPTH (400, -32600).
 * Iterative, so the check itself cannot overflow the stack that recursive processing would.
 */
export function refuseDeepNesting(value: unknown, what: string): void {
  const stack: Array<{ node: unknown; depth: number }> = [{ node: value, depth: 1 }];
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    if (depth > MAX_JSON_DEPTH) {
      throw new AcpError("InvalidRequest", `the ${what} nests deeper than ${MAX_JSON_DEPTH} levels`, {
        limit: MAX_JSON_DEPTH,
      });
    }
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push({ node: child, depth: depth + 1 });
    }
  }
}

/** The request target as a URL; one that cannot be parsed (`//`, a bad absolute form) is 400, -32600. */
export function requestUrl(req: IncomingMessage): URL {
  try {
    return new URL(req.url ?? "/", "http://gateway");
  } catch {
    throw new AcpError("InvalidRequest", "malformed request target");
  }
}

export type Params = Record<string, string>;
export type Handler = (
  req: IncomingMessage,
  res: ServerResponse,
  params: Params,
  url: URL,
) => Promise<void> | void;

interface Route {
  method: string;
  pattern: RegExp;
  names: string[];
  handler: Handler;
}

/** A minimal router: `/api/v1/messages/:id/status` style patterns, exact method match. */
export class Router {
  private readonly routes: Route[] = [];

  /**
   * Routes `method` requests whose path matches `path` (`:name` segments become `params.name`) to `handler`.
   */
  add(method: string, path: string, handler: Handler): this {
    const names: string[] = [];
    const pattern = new RegExp(
      `^${path.replace(/:([a-zA-Z_]+)/g, (_, name: string) => {
        names.push(name);
        return "([^/]+)";
      })}$`,
    );
    this.routes.push({ method, pattern, names, handler });
    return this;
  }

  /** The matching route's handler, or 404/405; throws 400 (-32600) for a malformed percent-escape. */
  match(method: string, pathname: string): { handler: Handler; params: Params } | { status: 404 | 405 } {
    let pathMatched = false;
    for (const route of this.routes) {
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      pathMatched = true;
      if (route.method !== method) continue;
      const params: Params = {};
      route.names.forEach((name, i) => {
        try {
          params[name] = decodeURIComponent(m[i + 1] ?? "");
        } catch {
          throw new AcpError("InvalidRequest", `malformed percent-encoding in the path (${name})`);
        }
      });
      return { handler: route.handler, params };
    }
    return { status: pathMatched ? 405 : 404 };
  }

  /** Runs the request's route; 404 or 405 (as an AcpError) when none matches. */
  async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = requestUrl(req);
    const match = this.match(req.method ?? "GET", url.pathname);
    if ("status" in match) {
      throw new AcpError(
        match.status === 404 ? "NotFound" : "MethodNotFound",
        `${match.status === 404 ? "no such endpoint" : "method not allowed"}: ${req.method} ${url.pathname}`,
      );
    }
    await match.handler(req, res, match.params, url);
  }
}

/** Certificate and key files of a TLS listener. */
export interface TlsFiles {
  cert: string;
  key: string;
}

/**
 * An HTTP server, or HTTPS (TLS 1.2 at least) when given certificate files, with the timeouts every
 * listener of the gateway uses: idle keep-alive 65 s, headers within 20 s, a whole request within 60 s.
 */
export function createListener(
  tls: TlsFiles | undefined,
  handle: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  const server: Server = tls
    ? createHttpsServer(
        { cert: readFileSync(tls.cert), key: readFileSync(tls.key), minVersion: "TLSv1.2" },
        handle,
      )
    : createHttpServer(handle);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 20_000;
  server.requestTimeout = 60_000;
  return server;
}

/**
 * Stops `server` taking connections; resolves once every open one has ended. A connection still in
 * its TLS handshake is not yet the HTTP server's, so `closeAllConnections` misses it; it is cut as
 * the handshake completes, or a client that sends a request on it every few seconds (a peer's
 * status poll) would hold it open, and the close, for good.
 */
export function stopListening(server: Server): Promise<void> {
  server.on("secureConnection", (socket: Socket) => socket.destroy());
  return new Promise((resolve) => server.close(() => resolve()));
}
