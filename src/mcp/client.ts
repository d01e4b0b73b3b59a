/**
 * A client for the `agents` capability of any MCP server: detects the capability from the raw
 * initialize result, lists agents (following cursors), runs them streaming deltas, and checks that
 * the deltas combine to exactly the final output.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { combineDelta, DeltaMismatchError } from "./delta.js";
import { AgentsRpcError } from "./errors.js";
import { firstDifference, isJsonObject, type JsonObject, type JsonValue } from "./json.js";
import {
  AGENTS_CAPABILITY,
  type AgentDescriptor,
  type AgentPage,
  AgentsListResultSchema,
  AgentsMethods,
  AgentsRunResultSchema,
  describeIssues,
  JsonRpcErrorCodes,
  RunProgressParamsSchema,
} from "./protocol.js";
import { type AgentsClientConnection, openAgentsClientConnection, type Transport } from "./sdk-adapter.js";

export interface RunAgentOptions {
  /** Called with each delta and the output accumulated so far; asking for it makes the run stream. */
  onDelta?: (delta: JsonValue, accumulated: JsonValue) => void;
  /** Aborting sends `notifications/cancelled`; the run rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Longest wait without any message for this run (reset by every delta), default 60 000 ms. */
  timeoutMs?: number;
}

export interface ConnectOptions {
  clientInfo?: { name: string; version: string };
}

/**
 * A client of an MCP server's `agents` capability (open one with `AgentsClient.connect` over a stdio or
 * Streamable HTTP transport): lists agents and runs them, streaming deltas and checking that they combine to
 * the final output.
 */
export class AgentsClient {
  readonly #connection: AgentsClientConnection;
  #runs = 0;

  private constructor(connection: AgentsClientConnection) {
    this.#connection = connection;
  }

  /**
   * Connects over `transport` and completes MCP's initialize; `hasAgentsCapability` then says whether the
   * server offers agents.
   */
  static async connect(transport: Transport, options: ConnectOptions = {}): Promise<AgentsClient> {
    const connection = await openAgentsClientConnection(
      transport,
      options.clientInfo ?? { name: "acp-kit", version: "0.1.0" },
    );
    return new AgentsClient(connection);
  }

  /** The underlying SDK client, for everything else the server offers (tools, resources, prompts). */
  get mcp(): Client {
    return this.#connection.client;
  }

  /** The server's capabilities as sent, including the top-level `agents` the SDK strips. */
  get serverCapabilities(): JsonObject {
    const capabilities = this.#connection.initializeResult.capabilities;
    return isJsonObject(capabilities) ? capabilities : {};
  }

  /**
   * Where the server declares `agents`: at the top level (as the MCP agents capability requires) or only as
   * the mirror.
   */
  get agentsCapability(): "top-level" | "experimental" | undefined {
    const capabilities = this.serverCapabilities;
    if (isJsonObject(capabilities[AGENTS_CAPABILITY])) return "top-level";
    const experimental = capabilities.experimental;
    if (isJsonObject(experimental) && isJsonObject(experimental[AGENTS_CAPABILITY])) return "experimental";
    return undefined;
  }

  /**
   * Whether the server announced the `agents` capability (top-level or under `experimental`) in its
   * initialize result.
   */
  get hasAgentsCapability(): boolean {
    return this.agentsCapability !== undefined;
  }

  /**
   * One page of `agents/list`; pass the `nextCursor` of the previous page for the next (`listAgents` follows
   * them all).
   */
  async listAgentsPage(cursor?: string, signal?: AbortSignal): Promise<AgentPage> {
    const params: JsonObject = cursor === undefined ? {} : { cursor };
    const page = await this.#connection.request(AgentsMethods.list, params, AgentsListResultSchema, signal);
    return page as AgentPage;
  }

  /** Every agent, following `nextCursor` until the last page. */
  async listAgents(signal?: AbortSignal): Promise<AgentDescriptor[]> {
    const agents: AgentDescriptor[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await this.listAgentsPage(cursor, signal);
      agents.push(...page.agents);
      cursor = page.nextCursor;
      if (cursor !== undefined && seen.has(cursor)) {
        throw new Error(`the MCP server returned the agents/list cursor ${JSON.stringify(cursor)} twice`);
      }
      if (cursor !== undefined) seen.add(cursor);
    } while (cursor !== undefined);
    return agents;
  }

  /** Runs an agent and returns its output; with `onDelta`, streams and verifies the deltas. */
  async runAgent(name: string, input?: JsonValue, options: RunAgentOptions = {}): Promise<JsonValue> {
    const { onDelta, signal } = options;
    const timeoutMs = options.timeoutMs ?? 60_000;
    signal?.throwIfAborted();
    const run = new AbortController();
    const timer = setTimeout(() => {
      const waitingFor = onDelta === undefined ? "its result" : "progress";
      run.abort(
        new AgentsRpcError(
          JsonRpcErrorCodes.RequestTimeout,
          `agents/run "${name}" timed out: no ${waitingFor} for ${timeoutMs} ms`,
          { agent: name, timeoutMs },
        ),
      );
    }, timeoutMs);
    const forwardAbort = () => run.abort(signal?.reason);
    signal?.addEventListener("abort", forwardAbort, { once: true });

    let accumulated: JsonValue | undefined;
    let deltas = 0;
    const progressToken = onDelta === undefined ? undefined : `acp-run-${++this.#runs}`;
    const unwatch =
      progressToken === undefined
        ? () => true
        : this.#connection.watchRun(progressToken, (kind, params) => {
            timer.refresh();
            if (kind !== "delta" || run.signal.aborted) return;
            try {
              const parsed = RunProgressParamsSchema.safeParse(params);
              if (!parsed.success) {
                throw new Error(
                  `malformed ${AgentsMethods.runProgress}: ${describeIssues(parsed.error.issues).summary}`,
                );
              }
              const delta = parsed.data.delta as JsonValue;
              accumulated = combineDelta(accumulated, delta);
              deltas++;
              onDelta?.(delta, accumulated);
            } catch (err) {
              run.abort(err); // a bad delta or a throwing onDelta ends the run with that error
            }
          });
    try {
      const params: JsonObject = { name };
      if (input !== undefined) params.input = input;
      if (progressToken !== undefined) params._meta = { progressToken };
      const result = await this.#connection.request(
        AgentsMethods.run,
        params,
        AgentsRunResultSchema,
        run.signal,
      );
      const output = result.output as JsonValue;
      const differsAt = deltas > 0 ? firstDifference(accumulated, output) : undefined;
      if (differsAt !== undefined) {
        throw new DeltaMismatchError(
          differsAt,
          `the ${deltas} deltas combine to ${preview(accumulated)} but the final output is ${preview(output)}`,
        );
      }
      return output;
    } finally {
      clearTimeout(timer);
      unwatch();
      signal?.removeEventListener("abort", forwardAbort);
    }
  }

  /** Closes the MCP session and its transport. */
  close(): Promise<void> {
    return this.#connection.close();
  }
}

/** `AgentsClient.connect` as a function. */
export function connectAgentsClient(transport: Transport, options?: ConnectOptions): Promise<AgentsClient> {
  return AgentsClient.connect(transport, options);
}

export interface StdioServerCommand {
  command: string;
  args?: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** The server's stderr: shown (`inherit`, default), readable as `transport.stderr` (`pipe`) or dropped. */
  stderr?: "inherit" | "pipe" | "ignore";
}

/** A transport that spawns an MCP server and talks to it over its stdin/stdout. */
export function stdioClientTransport(server: StdioServerCommand): StdioClientTransport {
  return new StdioClientTransport({
    command: server.command,
    args: server.args ?? [],
    ...(server.cwd !== undefined && { cwd: server.cwd }),
    ...(server.env !== undefined && { env: server.env }),
    stderr: server.stderr ?? "inherit",
  });
}

/** A Streamable HTTP transport; `apiKey` is sent as `X-API-Key` (what the gateway's /mcp expects). */
export function streamableHttpClientTransport(
  url: string | URL,
  options: { apiKey?: string; headers?: Record<string, string> } = {},
): StreamableHTTPClientTransport {
  const headers: Record<string, string> = { ...options.headers };
  if (options.apiKey !== undefined) headers["X-API-Key"] = options.apiKey;
  return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}

function preview(value: JsonValue | undefined): string {
  const text = value === undefined ? "nothing" : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
