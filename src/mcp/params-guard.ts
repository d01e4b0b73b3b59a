/**
 * Bad params are the caller's mistake, so every one is answered -32602 Invalid params with
 * `data: {reason: "InvalidParams", problems: [{path, message}]}` (errors.ts), never -32603, and a
 * handler that fails on valid params stays -32603. The MCP SDK 1.x gets this wrong in four places
 * (typescript-sdk issues #2284 and #2162), which this guard covers for one McpServer:
 * - the SDK parses each request against its method's schema as it dispatches it, before any code
 *   of ours runs, and answers a failure with -32603 and zod's issue list as the message: requests
 *   are checked here against the same schema as they come off the transport (`screen`);
 * - `resources/read` parses `params.uri` with `new URL()`, so a malformed URI was -32603 "Invalid URL";
 * - `tools/call` answers an unknown tool with an `isError` result instead of -32602; arguments its
 *   inputSchema refuses do get an `isError` result, as SEP-1303 (spec 2025-11-25) asks, so a model
 *   can read what to correct, but with zod's issues as JSON: ours names each field (`/params/arguments/…`);
 * - `prompts/get` answers bad arguments -32602 without saying which;
 * - its own -32602 answers ("Resource … not found", "Prompt … not found") carry no `data`.
 * The last three are handled around each request handler, which `install` wraps as it is registered.
 */
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ClientRequestSchema,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  JSONRPCRequestSchema,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import { type IssueLike, type Problem, problemsOf } from "../protocol/index.js";
import { InvalidParamsError, summarizeProblems } from "./errors.js";
import { JsonRpcErrorCodes } from "./protocol.js";

/** What the guard needs of a schema: zod's (and every Standard Schema's) `~standard.validate`. */
interface Validator {
  readonly "~standard": {
    validate(value: unknown): ValidationResult | Promise<ValidationResult>;
  };
}
type ValidationResult = { readonly issues?: readonly IssueLike[] | undefined };

type Handler = (request: { params?: Record<string, unknown> }, extra: unknown) => unknown;

/** The SDK's schema for each MCP request method (initialize, ping, tools/call, …). */
const SDK_REQUEST_SCHEMAS = new Map<string, Validator>(
  ClientRequestSchema.options.map((schema) => [schema.shape.method.value, schema]),
);

const URI_METHODS = new Set(["resources/read", "resources/subscribe", "resources/unsubscribe"]);

/** The field an SDK -32602 without data is about, per method (its messages name a URI, tool, prompt, ref). */
const SUBJECT_OF_METHOD: Record<string, string> = {
  "resources/read": "/params/uri",
  "resources/subscribe": "/params/uri",
  "resources/unsubscribe": "/params/uri",
  "tools/call": "/params/name",
  "prompts/get": "/params/name",
  "completion/complete": "/params/ref",
};

/** A tool's answer to arguments its inputSchema refuses (SEP-1303: a tool execution error). */
interface ToolInputRefusal {
  isError: true;
  content: { type: "text"; text: string }[];
}

/** What the SDK keeps of a registered tool or prompt (private fields of McpServer in SDK 1.x). */
interface Registered {
  enabled: boolean;
  inputSchema?: Validator;
  argsSchema?: Validator;
}

export class ParamsGuard {
  /** Schemas of the handlers registered after `install`; the SDK's own for the rest. */
  readonly #schemas = new Map<string, Validator>();
  /** Per method, whether a handler is registered: asking the SDK throws, too costly per request. */
  readonly #handled = new Map<string, boolean>();

  constructor(private readonly server: McpServer) {}

  /**
   * Wraps every request handler registered from now on (the SDK registers tools/call, prompts/get,
   * resources/read… lazily, when the first tool, prompt or resource is added), noting its schema.
   */
  install(): void {
    const sdk = this.server.server;
    const register = sdk.setRequestHandler.bind(sdk) as unknown as (
      schema: Validator,
      handler: Handler,
    ) => void;
    const guarded = (schema: Validator, handler: Handler): void => {
      const method = methodOf(schema);
      if (method !== undefined) this.#schemas.set(method, schema);
      this.#handled.clear();
      register(schema, async (request, extra) => {
        if (method !== undefined) {
          const refused = await this.#checkSubject(method, request.params ?? {});
          if (refused !== undefined) return refused;
        }
        try {
          return await handler(request, extra);
        } catch (err) {
          throw method === undefined ? err : withProblems(method, err);
        }
      });
    };
    sdk.setRequestHandler = guarded as unknown as typeof sdk.setRequestHandler;
  }

  /**
   * Answers requests whose params fail their method's schema with -32602 before the SDK sees them.
   * Installed after connect, so it wraps the SDK's own message handler. Only methods with a handler
   * are checked: for the others the SDK's -32601 Method not found is the better answer.
   */
  screen(transport: Transport): void {
    const sdk = transport.onmessage;
    transport.onmessage = (message: JSONRPCMessage, extra) => {
      if ("method" in message && "id" in message && this.#hasHandler(message.method)) {
        const schema = this.#schemas.get(message.method) ?? SDK_REQUEST_SCHEMAS.get(message.method);
        const problems = schema === undefined ? undefined : schemaProblems(schema, message);
        if (problems !== undefined) {
          // A failed send means the transport is closing: nobody is left to answer.
          transport.send(invalidParamsAnswer(message.id, message.method, problems)).catch(() => undefined);
          return;
        }
      }
      sdk?.(message, extra);
    };
  }

  #hasHandler(method: string): boolean {
    let handled = this.#handled.get(method);
    if (handled === undefined) {
      try {
        this.server.server.assertCanSetRequestHandler(method);
        handled = false;
      } catch {
        handled = true;
      }
      // Only the methods a server can serve are remembered: a client cannot grow this map.
      if (handled || SDK_REQUEST_SCHEMAS.has(method)) this.#handled.set(method, handled);
    }
    return handled;
  }

  /**
   * What the schema cannot see: a URI that does not parse, a tool or prompt that is not there, its
   * arguments. Throws the -32602 error, or returns the `isError` result of a tool's refused arguments.
   */
  async #checkSubject(
    method: string,
    params: Record<string, unknown>,
  ): Promise<ToolInputRefusal | undefined> {
    if (URI_METHODS.has(method) && !(typeof params.uri === "string" && URL.canParse(params.uri))) {
      const problems = [{ path: "/params/uri", message: "not an absolute URI" }];
      throw new InvalidParamsError(`invalid ${method} params: ${summarizeProblems(problems)}`, problems);
    }
    if (method === "tools/call") return this.#checkCall("tool", "_registeredTools", params);
    if (method === "prompts/get") await this.#checkCall("prompt", "_registeredPrompts", params);
    return undefined;
  }

  async #checkCall(
    kind: "tool" | "prompt",
    field: "_registeredTools" | "_registeredPrompts",
    params: Record<string, unknown>,
  ): Promise<ToolInputRefusal | undefined> {
    const registry = (this.server as unknown as Record<string, unknown>)[field];
    // Another SDK version keeps them elsewhere: its own answers stand.
    if (typeof registry !== "object" || registry === null || typeof params.name !== "string")
      return undefined;
    const all = registry as Record<string, Registered>;
    const name = params.name;
    const entry = Object.hasOwn(all, name) ? all[name] : undefined;
    if (entry === undefined || !entry.enabled) {
      const offered = Object.keys(all).filter((key) => all[key]?.enabled);
      throw new InvalidParamsError(`unknown ${kind} ${JSON.stringify(name)}`, [
        {
          path: "/params/name",
          message: `no ${kind} named ${JSON.stringify(name)} (there are: ${offered.join(", ") || "none"})`,
        },
      ]);
    }
    const schema = kind === "tool" ? entry.inputSchema : entry.argsSchema;
    if (schema === undefined) return undefined;
    const result = await schema["~standard"].validate(params.arguments ?? {});
    if (result.issues === undefined) return undefined;
    const problems = problemsOf(result.issues, "/params/arguments");
    const message = `invalid arguments for ${kind} ${JSON.stringify(name)}: ${summarizeProblems(problems)}`;
    if (kind === "prompt") throw new InvalidParamsError(message, problems);
    // No structuredContent: a client would check it against the tool's outputSchema.
    return { isError: true, content: [{ type: "text", text: message }] };
  }
}

/**
 * The -32602 answer to a request whose params break the SDK's JSON-RPC message schema (not an
 * object, a malformed `_meta`), or undefined. The SDK's transports refuse such a message whole,
 * as "-32700 Parse error: Invalid JSON-RPC message" without its id, so hosts ask this first.
 */
export function answerToMalformedParams(message: unknown): JSONRPCErrorResponse | undefined {
  if (typeof message !== "object" || message === null || !("params" in message)) return undefined;
  const { params: _params, ...envelope } = message as Record<string, unknown>;
  // Only when the params are all that is wrong: anything else is the transport's to refuse.
  if (!JSONRPCRequestSchema.safeParse(envelope).success) return undefined;
  const problems = schemaProblems(JSONRPCRequestSchema, message);
  const { method, id } = envelope as { method: string; id: RequestId };
  return problems === undefined ? undefined : invalidParamsAnswer(id, method, problems);
}

/**
 * What a Streamable HTTP host answers a POSTed body with before its transport sees it, or
 * undefined: for one request, bad params the transport would refuse whole (answerToMalformedParams)
 * or an `initialize` the SDK's schema refuses, which the transport would not recognise as one (it
 * answers "Bad Request: Server not initialized") and so never hand to a server. Sent with status
 * 200 as `application/json`, like any answer to a request, so clients match it to theirs by id.
 */
export function answerToBadParams(body: unknown): JSONRPCErrorResponse | undefined {
  const malformed = answerToMalformedParams(body);
  if (malformed !== undefined || (body as { method?: unknown } | null)?.method !== "initialize")
    return malformed;
  const { id } = body as { id?: unknown };
  if (!(typeof id === "string" || typeof id === "number")) return undefined;
  const problems = schemaProblems(SDK_REQUEST_SCHEMAS.get("initialize") as Validator, body);
  return problems === undefined ? undefined : invalidParamsAnswer(id, "initialize", problems);
}

function invalidParamsAnswer(id: RequestId, method: string, problems: Problem[]): JSONRPCErrorResponse {
  const error = new InvalidParamsError(`invalid ${method} params: ${summarizeProblems(problems)}`, problems);
  return { jsonrpc: "2.0", id, error: { code: error.code, message: error.message, data: error.data } };
}

/** The request's faults by `schema`; undefined when it passes, or when the schema is asynchronous. */
function schemaProblems(schema: Validator, request: unknown): Problem[] | undefined {
  const result = schema["~standard"].validate(request);
  // An asynchronous schema cannot be checked without reordering messages: the SDK parses it then.
  if (result instanceof Promise || result.issues === undefined) return undefined;
  return problemsOf(result.issues);
}

function methodOf(schema: Validator): string | undefined {
  const method = (schema as { shape?: { method?: { value?: unknown } } }).shape?.method?.value;
  return typeof method === "string" ? method : undefined;
}

/** An SDK -32602 without data gets the field it is about; anything else passes unchanged. */
function withProblems(method: string, err: unknown): unknown {
  const { code, data, message } = (err ?? {}) as { code?: unknown; data?: unknown; message?: unknown };
  if (code !== JsonRpcErrorCodes.InvalidParams || data !== undefined || typeof message !== "string")
    return err;
  const reason = message.replace(/^MCP error -?\d+: /, "");
  return new InvalidParamsError(reason, [{ path: SUBJECT_OF_METHOD[method] ?? "/params", message: reason }]);
}
