/**
 * The only file that knows how the MCP SDK (1.x) handles custom methods and capabilities. SDK 2.x
 * changes the custom-method API; porting the `agents` capability means rewriting this file alone.
 *
 * What it works around:
 * - The SDK's zod schemas strip unknown capability keys, so a top-level `capabilities.agents` is
 *   neither guaranteed to be sent by the server nor visible to `Client.getServerCapabilities()`.
 *   The server therefore adds it to the initialize result on its way to the transport, and the
 *   client keeps the raw initialize result as it comes off the transport.
 * - Custom request methods need zod schemas with a method literal and casts to the SDK's closed
 *   request/notification unions.
 * - The SDK answers several kinds of bad params with -32603 or an `isError` result: the server's
 *   ParamsGuard (params-guard.ts, the other file that knows SDK 1.x internals) answers -32602.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type ClientRequest,
  type JSONRPCMessage,
  McpError,
  type ServerCapabilities,
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { AgentsRpcError } from "./errors.js";
import { isJsonObject, type JsonObject } from "./json.js";
import { ParamsGuard } from "./params-guard.js";
import {
  AGENTS_CAPABILITY,
  AgentsMethods,
  describeIssues,
  McpNotifications,
  type ProgressToken,
} from "./protocol.js";
import { type AgentDefinition, type AgentHandler, AgentRegistry, type AgentSource } from "./agent-source.js";
import { type AgentRunEvent, handleAgentsList, handleAgentsRun } from "./server.js";

export type { Transport };

const AgentsListRequest = z.object({ method: z.literal(AgentsMethods.list), params: z.unknown().optional() });
const AgentsRunRequest = z.object({ method: z.literal(AgentsMethods.run), params: z.unknown().optional() });

export interface AgentsMcpServerOptions {
  name: string;
  version: string;
  /** Where the agents come from; default: a new in-process `AgentRegistry` (see `agent()`). */
  agents?: AgentSource;
  instructions?: string;
  /** More capabilities (e.g. `resources: { subscribe: true }`); tools/resources/prompts add theirs. */
  capabilities?: ServerCapabilities;
  onRunEvent?: (event: AgentRunEvent) => void;
}

/**
 * An SDK `McpServer` that also serves `agents/list` and `agents/run`. Create one per MCP session
 * (one per connection); tools, resources and prompts can be added with the usual McpServer API.
 */
export class AgentsMcpServer extends McpServer {
  readonly agents: AgentSource;
  readonly #params = new ParamsGuard(this);

  constructor(options: AgentsMcpServerOptions) {
    const capabilities = options.capabilities ?? {};
    super(
      { name: options.name, version: options.version },
      {
        ...(options.instructions !== undefined && { instructions: options.instructions }),
        // The mirror under `experimental` survives the SDK's schemas, for stock SDK clients.
        capabilities: {
          ...capabilities,
          experimental: { ...capabilities.experimental, [AGENTS_CAPABILITY]: {} },
        },
      },
    );
    this.agents = options.agents ?? new AgentRegistry();
    // Before any handler is registered, so that every one is guarded.
    this.#params.install();
    this.server.setRequestHandler(AgentsListRequest, async (request) => ({
      ...(await handleAgentsList(this.agents, request.params)),
    }));
    this.server.setRequestHandler(AgentsRunRequest, async (request, extra) => ({
      ...(await handleAgentsRun(this.agents, request.params, {
        signal: extra.signal,
        ...(extra._meta?.progressToken !== undefined && { progressToken: extra._meta.progressToken }),
        notify: (notification) => extra.sendNotification(notification as unknown as ServerNotification),
        ...(options.onRunEvent !== undefined && { onRunEvent: options.onRunEvent }),
      })),
    }));
  }

  /** Registers an in-process agent (only when this server's agents are an `AgentRegistry`). */
  agent<I extends z.ZodType, O extends z.ZodType>(
    name: string,
    definition: AgentDefinition<I, O>,
    handler: AgentHandler<I, O>,
  ): this {
    if (!(this.agents instanceof AgentRegistry)) {
      throw new TypeError("this server's agents come from a custom AgentSource: register agents there");
    }
    this.agents.agent(name, definition, handler);
    return this;
  }

  /**
   * Connects like McpServer, announcing `agents` as a top-level capability on this transport and
   * answering bad params with -32602 naming the field (params-guard.ts).
   */
  override async connect(transport: Transport): Promise<void> {
    announceTopLevelAgentsCapability(transport);
    await super.connect(transport);
    this.#params.screen(transport);
  }
}

/** One server per MCP session: `createAgentsMcpServer({ name, version, agents })`. */
export function createAgentsMcpServer(options: AgentsMcpServerOptions): AgentsMcpServer {
  return new AgentsMcpServer(options);
}

/**
 * Adds `capabilities.agents` to the server's initialize result as it is sent. The request ids of
 * incoming `initialize` requests are noted first (the SDK chains an `onmessage` set before connect).
 */
function announceTopLevelAgentsCapability(transport: Transport): void {
  const initializeIds = new Set<string | number>();
  const upstream = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage, extra) => {
    if ("method" in message && message.method === "initialize" && "id" in message)
      initializeIds.add(message.id);
    upstream?.(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if ("result" in message && initializeIds.delete(message.id)) {
      const capabilities = isJsonObject(message.result.capabilities) ? message.result.capabilities : {};
      const result = { ...message.result, capabilities: { ...capabilities, [AGENTS_CAPABILITY]: {} } };
      return send({ ...message, result }, options);
    }
    return send(message, options);
  };
}

export type RunNotificationListener = (kind: "delta" | "progress", params: unknown) => void;

/** A connected SDK `Client` plus what the agents client needs from below the SDK's schemas. */
export interface AgentsClientConnection {
  readonly client: Client;
  /** The server's initialize result exactly as it arrived (before the SDK stripped unknown keys). */
  readonly initializeResult: JsonObject;
  request<T extends z.ZodType>(
    method: string,
    params: JsonObject,
    resultSchema: T,
    signal?: AbortSignal,
  ): Promise<z.output<T>>;
  /** Receives the run-progress and standard progress notifications carrying `token`, until unwatched. */
  watchRun(token: ProgressToken, listener: RunNotificationListener): () => void;
  close(): Promise<void>;
}

// Longest delay setTimeout accepts; our client runs its own inactivity timer instead of the SDK's.
const NO_SDK_TIMEOUT = 2 ** 31 - 1;

export async function openAgentsClientConnection(
  transport: Transport,
  clientInfo: { name: string; version: string },
): Promise<AgentsClientConnection> {
  let initializeId: string | number | undefined;
  let initializeResult: JsonObject | undefined;
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if ("method" in message && message.method === "initialize" && "id" in message) initializeId = message.id;
    return send(message, options);
  };
  // Set before connect, so the SDK calls it first with every raw message.
  transport.onmessage = (message: JSONRPCMessage) => {
    if ("result" in message && message.id === initializeId && initializeResult === undefined) {
      initializeResult = message.result as JsonObject;
    }
  };
  const client = new Client(clientInfo);
  await client.connect(transport);
  if (initializeResult === undefined) throw new Error("the MCP server's initialize result was not observed");

  // After connect, the SDK's own handler is in place: route our runs' notifications before it, so the
  // SDK never sees progress for tokens it did not issue (it would report them as errors).
  const watchers = new Map<ProgressToken, RunNotificationListener>();
  const sdkOnMessage = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage, extra) => {
    if ("method" in message && !("id" in message) && isJsonObject(message.params)) {
      const token = message.params.progressToken;
      const watcher =
        typeof token === "string" || typeof token === "number" ? watchers.get(token) : undefined;
      if (watcher !== undefined && message.method === AgentsMethods.runProgress)
        return watcher("delta", message.params);
      if (watcher !== undefined && message.method === McpNotifications.progress) {
        return watcher("progress", message.params);
      }
    }
    sdkOnMessage?.(message, extra);
  };

  return {
    client,
    initializeResult,
    async request(method, params, resultSchema, signal) {
      try {
        return await client.request({ method, params } as unknown as ClientRequest, resultSchema, {
          ...(signal !== undefined && { signal }),
          timeout: NO_SDK_TIMEOUT,
        });
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof McpError) {
          throw new AgentsRpcError(err.code, err.message.replace(/^MCP error -?\d+: /, ""), err.data);
        }
        if (err instanceof z.ZodError) {
          throw new Error(
            `malformed ${method} result from the MCP server: ${describeIssues(err.issues).summary}`,
          );
        }
        throw err;
      }
    },
    watchRun(token, listener) {
      watchers.set(token, listener);
      return () => watchers.delete(token);
    },
    close: () => client.close(),
  };
}
