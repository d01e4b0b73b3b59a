/**
 * Where an MCP server's agents come from. `AgentSource` is the interface the server talks to (the
 * gateway implements it over its registry and runs agents remotely); `AgentRegistry` is the
 * in-process implementation, with zod schemas for input and output.
 */
import { z } from "zod";
import { AgentInputError, AgentOutputError, InvalidCursorError, UnknownAgentError } from "./errors.js";
import type { JsonObject, JsonValue } from "./json.js";
import type { AgentDescriptor, AgentPage } from "./protocol.js";

export interface AgentRunContext {
  /** Fires when the client cancels the run (`notifications/cancelled`) or the connection closes. */
  signal: AbortSignal;
  /**
   * Streams a delta of the output. Throws at once (synchronously) when the delta does not combine
   * with what was emitted before (`DeltaCombineError`); the promise settles when the notification
   * has been handed to the transport, and never rejects.
   */
  emit(delta: JsonValue): Promise<void>;
}

/**
 * Where an MCP server's agents come from: `AgentRegistry` holds agents defined in this process; the gateway
 * implements it over its registry and runs agents remotely.
 */
export interface AgentSource {
  /** One page of agents; `cursor` is a `nextCursor` this source returned (else `InvalidCursorError`). */
  list(cursor: string | undefined): Promise<AgentPage>;
  /**
   * An agent's descriptor (name, description, input and output schemas), or undefined when there is none of
   * that name.
   */
  get(name: string): Promise<AgentDescriptor | undefined>;
  /**
   * Runs an agent: validates the input (`AgentInputError`), runs, validates the output
   * (`AgentOutputError`); `UnknownAgentError` for a name it does not have.
   */
  run(name: string, input: JsonValue | undefined, context: AgentRunContext): Promise<JsonValue>;
}

export interface AgentDefinition<I extends z.ZodType, O extends z.ZodType> {
  description?: string;
  input: I;
  output: O;
}

export type AgentHandler<I extends z.ZodType, O extends z.ZodType> = (
  input: z.output<I>,
  context: AgentRunContext,
) => Promise<z.input<O>> | z.input<O>;

interface RegisteredAgent {
  descriptor: AgentDescriptor;
  input: z.ZodType;
  output: z.ZodType;
  handler: (input: unknown, context: AgentRunContext) => Promise<unknown> | unknown;
}

const AGENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export interface AgentRegistryOptions {
  /** Agents per `agents/list` page (default 50). */
  pageSize?: number;
}

/**
 * The agents of this process, each defined with zod input and output schemas and a handler;
 * `createAgentsMcpServer` serves them over MCP. Its `list` pages through them in registration order.
 */
export class AgentRegistry implements AgentSource {
  readonly #agents = new Map<string, RegisteredAgent>();
  readonly #pageSize: number;

  constructor(options: AgentRegistryOptions = {}) {
    const pageSize = options.pageSize ?? 50;
    if (!Number.isInteger(pageSize) || pageSize < 1) {
      throw new RangeError(`pageSize must be a positive integer, got ${pageSize}`);
    }
    this.#pageSize = pageSize;
  }

  /** Registers an agent; its JSON Schemas are generated now, so an unrepresentable schema fails here. */
  agent<I extends z.ZodType, O extends z.ZodType>(
    name: string,
    definition: AgentDefinition<I, O>,
    handler: AgentHandler<I, O>,
  ): this {
    if (!AGENT_NAME.test(name)) {
      throw new TypeError(
        `agent name ${JSON.stringify(name)} must match ${AGENT_NAME} (letters, digits, _ . -)`,
      );
    }
    if (this.#agents.has(name)) throw new Error(`agent "${name}" is already registered`);
    const descriptor: AgentDescriptor = {
      name,
      ...(definition.description !== undefined && { description: definition.description }),
      inputSchema: toJsonSchema(name, "input", definition.input),
      outputSchema: toJsonSchema(name, "output", definition.output),
    };
    this.#agents.set(name, {
      descriptor,
      input: definition.input,
      output: definition.output,
      handler: handler as RegisteredAgent["handler"],
    });
    return this;
  }

  /** How many agents are registered. */
  get size(): number {
    return this.#agents.size;
  }

  async list(cursor: string | undefined): Promise<AgentPage> {
    const all = [...this.#agents.values()];
    const offset = cursor === undefined ? 0 : decodeCursor(cursor, all.length);
    const page = all.slice(offset, offset + this.#pageSize).map((agent) => agent.descriptor);
    const next = offset + this.#pageSize;
    return next < all.length ? { agents: page, nextCursor: encodeCursor(next) } : { agents: page };
  }

  async get(name: string): Promise<AgentDescriptor | undefined> {
    return this.#agents.get(name)?.descriptor;
  }

  async run(name: string, input: JsonValue | undefined, context: AgentRunContext): Promise<JsonValue> {
    const agent = this.#agents.get(name);
    if (agent === undefined) throw new UnknownAgentError(name);
    const parsedInput = await agent.input.safeParseAsync(input);
    if (!parsedInput.success) throw new AgentInputError(name, parsedInput.error.issues);
    const output = await agent.handler(parsedInput.data, context);
    const parsedOutput = await agent.output.safeParseAsync(output);
    if (!parsedOutput.success) throw new AgentOutputError(name, parsedOutput.error.issues);
    return parsedOutput.data as JsonValue;
  }
}

function toJsonSchema(agent: string, which: "input" | "output", schema: z.ZodType): JsonObject {
  try {
    const generated = z.toJSONSchema(schema, { io: which });
    return generated as unknown as JsonObject;
  } catch (err) {
    throw new TypeError(
      `agent "${agent}": its ${which} schema cannot be expressed as JSON Schema (${(err as Error).message})`,
    );
  }
}

// Cursors are opaque to clients; here they carry the offset of the next page.
function encodeCursor(offset: number): string {
  return Buffer.from(JSON.stringify({ offset })).toString("base64url");
}

function decodeCursor(cursor: string, total: number): number {
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    const offset = (decoded as { offset?: unknown }).offset;
    if (typeof offset === "number" && Number.isInteger(offset) && offset > 0 && offset < total) return offset;
  } catch {
    // falls through to the error below
  }
  throw new InvalidCursorError(cursor);
}
