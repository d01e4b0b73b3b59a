/**
 * Serving MCP agents from an ACP agent. The gateway's MCP endpoint (docs/mcp.md, "The gateway's
 * MCP endpoint") lists what agents publish here and carries each `agents/run` to the agent as a
 * signed `agent.mcp.run` request; the agent streams deltas back as `agent.mcp.progress`
 * notifications and answers `{output, deltas}`. Any other ACP agent may send the same request
 * directly.
 */
import { z } from "zod";
import type { AgentHandler } from "../mcp/agent-source.js";
import { combineDelta } from "../mcp/delta.js";
import type { JsonObject, JsonValue } from "../mcp/json.js";
import {
  McpAgentName,
  McpCancelBody,
  McpRunBody,
  McpRunMethods,
  type PublishedAgentBody,
} from "../mcp/messages.js";
import { describeIssues } from "../mcp/protocol.js";
import { AcpError, problemsOf } from "../protocol/index.js";
import type { AcpAgent } from "./agent.js";
import { GatewayUnreachableError, SdkError } from "./errors.js";
import type { InboundContext } from "./types.js";

export interface McpAgentDefinition<I extends z.ZodType, O extends z.ZodType> {
  description?: string;
  input: I;
  output: O;
}

export interface ServeMcpAgentOptions {
  /** The agent's API key (the one its AcpAgent uses): publishes the descriptor at the gateway. */
  apiKey: string;
}

export interface ServedMcpAgent {
  /** Listed at the gateway's MCP endpoint as `<agent-id>/<name>`. */
  readonly name: string;
  /** Stops serving it and removes it from the gateway's `agents/list`. */
  withdraw(): Promise<void>;
}

interface Served {
  input: z.ZodType;
  output: z.ZodType;
  handler: (input: unknown, context: Parameters<AgentHandler<z.ZodType, z.ZodType>>[1]) => unknown;
}

/** Per AcpAgent: its MCP agents and runs under way (the SDK allows one handler per method). */
interface Host {
  agents: Map<string, Served>;
  runs: Map<string, { from: string; controller: AbortController }>;
}

const hosts = new WeakMap<AcpAgent, Host>();

/**
 * Serves `name` from `agent`: validates input and output with the zod schemas, runs `handler`
 * with an AbortSignal (fired by `agent.mcp.cancel` from the requester) and `emit(delta)` (sent to
 * the requester as `agent.mcp.progress`), and publishes the descriptor at the agent's gateway.
 */
export async function serveMcpAgent<I extends z.ZodType, O extends z.ZodType>(
  agent: AcpAgent,
  name: string,
  definition: McpAgentDefinition<I, O>,
  handler: AgentHandler<I, O>,
  options: ServeMcpAgentOptions,
): Promise<ServedMcpAgent> {
  const parsedName = McpAgentName.safeParse(name);
  if (!parsedName.success) {
    throw new AcpError(
      "InvalidParams",
      `MCP agent name ${JSON.stringify(name)} ${parsedName.error.issues[0]?.message}`,
      {
        problems: [{ path: "/name", message: parsedName.error.issues[0]?.message ?? "invalid" }],
      },
    );
  }
  const host = hostOf(agent);
  if (host.agents.has(name))
    throw new SdkError("AlreadyRegistered", `MCP agent "${name}" is already served by this agent`);
  const descriptor: PublishedAgentBody = {
    ...(definition.description !== undefined && { description: definition.description }),
    inputSchema: toJsonSchema(name, "input", definition.input),
    outputSchema: toJsonSchema(name, "output", definition.output),
  };
  host.agents.set(name, {
    input: definition.input,
    output: definition.output,
    handler: handler as Served["handler"],
  });
  try {
    await publish(agent, options.apiKey, "PUT", name, descriptor);
  } catch (err) {
    host.agents.delete(name);
    throw err;
  }
  return {
    name,
    async withdraw() {
      host.agents.delete(name);
      await publish(agent, options.apiKey, "DELETE", name);
    },
  };
}

function hostOf(agent: AcpAgent): Host {
  let host = hosts.get(agent);
  if (host) return host;
  const created: Host = { agents: new Map(), runs: new Map() };
  hosts.set(agent, created);
  agent.onRequest(McpRunMethods.run, (body, context) => runServed(agent, created, body, context));
  agent.onNotification((body, context) => {
    if (context.method !== McpRunMethods.cancel) return;
    const parsed = McpCancelBody.safeParse(body);
    const run = parsed.success ? created.runs.get(parsed.data.runId) : undefined;
    // Only the agent that asked for the run may cancel it.
    if (run && run.from === context.from)
      run.controller.abort(new AcpError("Cancelled", "the requester cancelled the run"));
  });
  host = created;
  return host;
}

async function runServed(
  agent: AcpAgent,
  host: Host,
  body: Record<string, unknown>,
  context: InboundContext,
): Promise<Record<string, unknown>> {
  const request = McpRunBody.safeParse(body);
  if (!request.success) {
    const { summary, issues } = describeIssues(request.error.issues);
    throw new AcpError("InvalidParams", `invalid ${McpRunMethods.run} body: ${summary}`, {
      problems: problemsOf(issues, "/params/body"),
    });
  }
  const { name, runId } = request.data;
  const served = host.agents.get(name);
  if (!served) {
    throw new AcpError("InvalidParams", `unknown agent "${name}"`, {
      problems: [{ path: "/params/body/name", message: `${agent.agentId} serves no MCP agent ${name}` }],
    });
  }
  const input = await served.input.safeParseAsync(request.data.input);
  if (!input.success) {
    const { summary, issues } = describeIssues(input.error.issues);
    throw new AcpError("InvalidParams", `invalid input for agent "${name}": ${summary}`, {
      issues,
      problems: problemsOf(issues, "/params/body/input"),
    });
  }
  if (host.runs.has(runId)) throw new AcpError("Conflict", `run ${runId} is already under way`);
  const controller = new AbortController();
  host.runs.set(runId, { from: context.from, controller });
  const stream = new ProgressStream(agent, context.from, runId, controller.signal);
  try {
    const output = await served.handler(input.data, {
      signal: controller.signal,
      emit: (delta) => stream.emit(delta),
    });
    controller.signal.throwIfAborted();
    const parsed = await served.output.safeParseAsync(output);
    if (!parsed.success) {
      throw new AcpError(
        "InternalError",
        `agent "${name}" returned an invalid output: ${describeIssues(parsed.error.issues).summary}`,
      );
    }
    const deltas = await stream.finish();
    return { output: parsed.data as JsonValue, deltas };
  } catch (err) {
    stream.close();
    if (err instanceof AcpError) throw err;
    if (controller.signal.aborted) throw new AcpError("Cancelled", `run ${runId} of "${name}" was cancelled`);
    // The requester sees why; the SDK would otherwise hide a plain Error's message.
    throw new AcpError("InternalError", `agent "${name}" failed: ${(err as Error).message}`);
  } finally {
    host.runs.delete(runId);
  }
}

/** The run's deltas: checked to combine, sent in order as numbered `agent.mcp.progress` notifications. */
class ProgressStream {
  #seq = 0;
  #accumulated: JsonValue | undefined;
  #closed = false;
  #sending: Promise<void> = Promise.resolve();

  constructor(
    private readonly agent: AcpAgent,
    private readonly to: string,
    private readonly runId: string,
    private readonly signal: AbortSignal,
  ) {}

  emit(delta: JsonValue): Promise<void> {
    if (this.#closed) throw new Error("emit() was called after the agent's run had finished");
    this.#accumulated = combineDelta(this.#accumulated, delta);
    const seq = ++this.#seq;
    this.#sending = this.#sending.then(async () => {
      if (this.signal.aborted) return;
      try {
        await this.agent.notify(
          this.to,
          { runId: this.runId, seq, delta },
          { method: McpRunMethods.progress },
        );
      } catch {
        // A lost delta is recovered: the requester completes the output from the final answer.
      }
    });
    return this.#sending;
  }

  /** Waits until every delta was handed to the gateway; the count goes into the response. */
  async finish(): Promise<number> {
    this.#closed = true;
    await this.#sending;
    return this.#seq;
  }

  close(): void {
    this.#closed = true;
  }
}

async function publish(
  agent: AcpAgent,
  apiKey: string,
  method: "PUT" | "DELETE",
  name: string,
  descriptor?: PublishedAgentBody,
): Promise<void> {
  const url = `${agent.gateway}/api/v1/mcp/agents/${encodeURIComponent(name)}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers: {
        "x-api-key": apiKey,
        ...(descriptor !== undefined && { "content-type": "application/json" }),
      },
      ...(descriptor !== undefined && { body: JSON.stringify(descriptor) }),
    });
  } catch (err) {
    throw new GatewayUnreachableError(agent.gateway, err);
  }
  if (response.ok) return;
  const text = await response.text();
  const error = (() => {
    try {
      return (JSON.parse(text) as { error?: { message?: string } }).error?.message;
    } catch {
      return undefined;
    }
  })();
  throw new AcpError(
    response.status === 401 ? "Unauthorized" : "InternalError",
    `${method} ${url}: the gateway answered ${response.status}${error ? `: ${error}` : ""}`,
    { httpStatus: response.status },
  );
}

function toJsonSchema(name: string, which: "input" | "output", schema: z.ZodType): JsonObject {
  try {
    return z.toJSONSchema(schema, { io: which }) as unknown as JsonObject;
  } catch (err) {
    throw new AcpError(
      "InvalidParams",
      `MCP agent "${name}": its ${which} schema cannot be expressed as JSON Schema (${(err as Error).message})`,
    );
  }
}
