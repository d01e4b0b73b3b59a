/**
 * `acp mcp serve --gateway URL`: a desktop MCP client (stdio) talks to the gateway's MCP endpoint
 * through this process. Messages pass through unchanged in both directions (so the agents
 * capability, progress, cancellation, subscriptions, tools and prompts all work as at the gateway),
 * with three additions:
 * - with the agent's key file, this process declares `acpSigning` and answers the gateway's
 *   `acp/sign` requests itself, so the task tools work and the key never leaves the machine;
 * - a `ping` every `pingIntervalMs` keeps the gateway session from expiring while the desktop
 *   client is idle (the gateway closes sessions after 10 minutes without traffic);
 * - a request the gateway cannot take (unreachable, 401, session gone) is answered with a JSON-RPC
 *   error naming the cause, instead of leaving the desktop client waiting.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { PrivateIdentity } from "../protocol/index.js";
import { streamableHttpClientTransport } from "./client.js";
import { isJsonObject, type JsonObject } from "./json.js";
import { ACP_SIGN_METHOD, ACP_SIGNING_CAPABILITY, type AcpSignParams } from "./messages.js";
import { signForGateway } from "./proxy-signing.js";
import type { Transport } from "./sdk-adapter.js";

export interface GatewayProxyOptions {
  /** The gateway's base URL (`http://host:port`) or its MCP URL (`…/mcp`). */
  gateway: string;
  apiKey: string;
  /** The agent's private identity: enables signing for the task tools. */
  identity?: PrivateIdentity;
  /** skill-layers-loaded on signed messages. Default [0, 1]. */
  layers?: number[];
  /** Default 60 s. */
  pingIntervalMs?: number;
  /** One line per notable event (signatures, errors); default: nothing. */
  log?: (line: string) => void;
}

export interface GatewayProxy {
  /** Resolves when either side closed (the desktop client went away, or the gateway session ended). */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

const PING_PREFIX = "acp-proxy-ping-";

/** The MCP URL of a gateway given by its base URL or its MCP URL. */
export function gatewayMcpUrl(gateway: string): URL {
  const url = new URL(gateway);
  if (!url.pathname.endsWith("/mcp")) url.pathname = `${url.pathname.replace(/\/+$/, "")}/mcp`;
  return url;
}

export async function proxyToGateway(local: Transport, options: GatewayProxyOptions): Promise<GatewayProxy> {
  const log = options.log ?? (() => {});
  const remote = streamableHttpClientTransport(gatewayMcpUrl(options.gateway), { apiKey: options.apiKey });
  let initializeId: string | number | undefined;
  let pings = 0;
  let pingTimer: NodeJS.Timeout | undefined;
  let resolveClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });

  // Once: closing either transport fires its onclose, which calls this again (each transport's
  // close() calls its onclose, so without the guard the two would call each other forever).
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      clearInterval(pingTimer);
      pingTimer = undefined;
      await remote.terminateSession().catch(() => undefined);
      await Promise.allSettled([remote.close(), local.close()]);
      resolveClosed();
    })();
    return closing;
  };

  const answerLocally = (id: string | number, message: string) =>
    local.send({ jsonrpc: "2.0", id, error: { code: -32000, message } }).catch(() => undefined);

  local.onmessage = (message: JSONRPCMessage) => {
    let outgoing = message;
    if ("method" in message && message.method === "initialize" && "id" in message) {
      initializeId = message.id;
      if (options.identity) outgoing = withSigningCapability(message);
    }
    remote.send(outgoing).catch((err: Error) => {
      const why = describeRefusal(err);
      log(`the gateway did not take ${"method" in message ? message.method : "a response"}: ${why}`);
      if ("method" in message && "id" in message)
        void answerLocally(message.id, `the gateway refused it: ${why}`);
    });
  };

  remote.onmessage = (message: JSONRPCMessage) => {
    if (
      "id" in message &&
      typeof message.id === "string" &&
      message.id.startsWith(PING_PREFIX) &&
      !("method" in message)
    ) {
      return; // our keep-alive's answer
    }
    if ("method" in message && message.method === ACP_SIGN_METHOD && "id" in message && options.identity) {
      void sign(message.id, message.params);
      return;
    }
    if ("result" in message && message.id === initializeId) {
      const version = message.result.protocolVersion;
      if (typeof version === "string") remote.setProtocolVersion(version);
      startPings();
    }
    local.send(message).catch(() => undefined);
  };

  const sign = async (id: string | number, params: unknown) => {
    try {
      const result = signForGateway(options.identity as PrivateIdentity, params, {
        ...(options.layers !== undefined && { layers: options.layers }),
        onSign: (request: AcpSignParams) => log(`signed ${request.purpose}`),
      });
      await remote.send({ jsonrpc: "2.0", id, result });
    } catch (err) {
      log(`refused to sign: ${(err as Error).message}`);
      await remote
        .send({ jsonrpc: "2.0", id, error: { code: -32602, message: (err as Error).message } })
        .catch(() => undefined);
    }
  };

  const startPings = () => {
    if (pingTimer !== undefined) return;
    pingTimer = setInterval(() => {
      remote
        .send({ jsonrpc: "2.0", id: `${PING_PREFIX}${++pings}`, method: "ping" })
        .catch((err: Error) => log(`ping failed: ${err.message}`));
    }, options.pingIntervalMs ?? 60_000);
    pingTimer.unref();
  };

  remote.onerror = (err) => log(`gateway: ${err.message}`);
  remote.onclose = () => void close();
  local.onclose = () => void close();
  await remote.start();
  await local.start();
  return { closed, close };
}

/** The desktop client's initialize, declaring that this side signs `acp/sign` requests. */
function withSigningCapability(message: JSONRPCMessage): JSONRPCMessage {
  const request = message as JSONRPCMessage & { params?: JsonObject };
  const params = isJsonObject(request.params) ? request.params : {};
  const capabilities = isJsonObject(params.capabilities) ? params.capabilities : {};
  const experimental = isJsonObject(capabilities.experimental) ? capabilities.experimental : {};
  return {
    ...request,
    params: {
      ...params,
      capabilities: { ...capabilities, experimental: { ...experimental, [ACP_SIGNING_CAPABILITY]: {} } },
    },
  } as JSONRPCMessage;
}

/** "HTTP 401: unknown or revoked API key" from the SDK's "Streamable HTTP error: Error POSTing to endpoint: {json}". */
function describeRefusal(err: Error): string {
  const status = (err as { code?: unknown }).code;
  const body = /Error POSTing to endpoint: (.*)$/s.exec(err.message)?.[1];
  let detail = err.message;
  try {
    const parsed = JSON.parse(body ?? "") as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === "string") detail = parsed.error.message;
  } catch {
    // not the gateway's JSON-RPC error body: keep the SDK's message
  }
  return typeof status === "number" ? `HTTP ${status}: ${detail}` : detail;
}
