/**
 * A minimal Streamable HTTP host for MCP servers on `node:http`: one SDK transport and one server
 * per MCP session (`Mcp-Session-Id`), created on `initialize`, freed on DELETE or close. It has no
 * authentication: it is for local use, tests and benchmarks (the gateway serves `/mcp` itself).
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { readJsonBody, sendError, sendJson } from "../http/server.js";
import { answerToBadParams } from "./params-guard.js";
import type { Transport } from "./sdk-adapter.js";

/** The SDK transport's own default limit on a POSTed body. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** What the host needs of a server: an SDK `McpServer` (or our `AgentsMcpServer`) fits. */
export interface ConnectableMcpServer {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

export interface McpHttpHostOptions {
  /** Called once per MCP session. */
  createServer: () => ConnectableMcpServer;
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  path?: string;
  /** Answer requests with plain JSON instead of an SSE stream (no progress notifications then). */
  enableJsonResponse?: boolean;
}

export interface McpHttpHost {
  readonly url: string;
  readonly sessionCount: number;
  close(): Promise<void>;
}

/**
 * Serves MCP servers over Streamable HTTP on `path` (default `/mcp`), one server per MCP session from
 * `createServer`; resolves once listening, with the URL to connect to.
 */
export async function serveMcpOverHttp(options: McpHttpHostOptions): Promise<McpHttpHost> {
  const path = options.path ?? "/mcp";
  const sessions = new Map<
    string,
    { transport: StreamableHTTPServerTransport; server: ConnectableMcpServer }
  >();

  async function openSession(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const server = options.createServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      enableJsonResponse: options.enableJsonResponse ?? false,
      onsessioninitialized: (sessionId) => {
        sessions.set(sessionId, { transport, server });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    // Anything but a valid initialize was answered with an error and opened no session.
    if (transport.sessionId === undefined || !sessions.has(transport.sessionId)) await server.close();
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== path) return reply(res, 404, `no MCP endpoint at ${url.pathname}; use ${path}`);
    const sessionId = req.headers["mcp-session-id"];
    const session = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (typeof sessionId === "string" && session === undefined) {
      return reply(res, 404, `unknown MCP session ${sessionId}`);
    }
    if (session === undefined && req.method !== "POST")
      return reply(res, 400, "missing Mcp-Session-Id header");
    // Read here rather than by the SDK's transport, so that bad params it would refuse whole, or not
    // recognise as an initialize, are answered -32602 naming the field (params-guard.ts).
    let body: unknown;
    try {
      body = req.method === "POST" ? await readJsonBody(req, MAX_BODY_BYTES) : undefined;
    } catch (err) {
      return sendError(res, err); // not JSON (-32700), too large or too deep: ACP's error bodies
    }
    const refusal = answerToBadParams(body);
    if (refusal !== undefined) return sendJson(res, 200, refusal);
    if (session !== undefined) return session.transport.handleRequest(req, res, body);
    return openSession(req, res, body);
  }

  const http = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (!res.headersSent) reply(res, 500, err instanceof Error ? err.message : String(err));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const address = http.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}${path}`,
    get sessionCount() {
      return sessions.size;
    },
    async close() {
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(open.map((session) => session.server.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message } }));
}
