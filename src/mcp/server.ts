/**
 * What the server does for `agents/list` and `agents/run`, independent of the MCP SDK: the adapter
 * (sdk-adapter.ts) parses nothing and decides nothing; it hands the raw params and a way to send
 * notifications to these functions, and returns their result or error.
 */
import { problemsOf } from "../protocol/index.js";
import { combineDelta, remainingDelta } from "./delta.js";
import { AgentsRpcError, InvalidParamsError, UnknownAgentError } from "./errors.js";
import type { JsonValue } from "./json.js";
import {
  type AgentPage,
  AgentsListParamsSchema,
  AgentsMethods,
  AgentsRunParamsSchema,
  type AgentsRunResult,
  describeIssues,
  JsonRpcErrorCodes,
  McpNotifications,
  type ProgressToken,
} from "./protocol.js";
import type { AgentSource } from "./agent-source.js";

/** Lifecycle of a run, for logs and metrics (e.g. `acp mcp serve` prints them on stderr). */
export type AgentRunEvent =
  | { type: "started"; agent: string; streaming: boolean }
  | { type: "completed"; agent: string; deltas: number }
  | { type: "failed"; agent: string; error: string }
  | { type: "cancelled"; agent: string; deltas: number };

export interface OutgoingNotification {
  method: string;
  params: Record<string, JsonValue>;
}

export interface RunRequestContext {
  /** Aborted by the SDK on `notifications/cancelled` for this request, or when the connection closes. */
  signal: AbortSignal;
  /** From the request's `_meta.progressToken`; when present, deltas are streamed. */
  progressToken?: ProgressToken;
  /** Sends a notification related to this request (on its SSE stream over Streamable HTTP). */
  notify(notification: OutgoingNotification): Promise<void>;
  /**
   * How each delta travels: `agents` (default) as `notifications/agents/run/progress` followed by a
   * `notifications/progress`; `progress` as one `notifications/progress` whose `message` is the
   * delta as JSON text (for `tools/call`, where a host understands only standard progress).
   */
  deltasAs?: "agents" | "progress";
  onRunEvent?: (event: AgentRunEvent) => void;
}

export async function handleAgentsList(source: AgentSource, params: unknown): Promise<AgentPage> {
  const parsed = AgentsListParamsSchema.safeParse(params ?? {});
  if (!parsed.success) throw invalidParams(AgentsMethods.list, parsed.error.issues);
  return source.list(parsed.data.cursor);
}

export async function handleAgentsRun(
  source: AgentSource,
  params: unknown,
  context: RunRequestContext,
): Promise<AgentsRunResult> {
  const parsed = AgentsRunParamsSchema.safeParse(params);
  if (!parsed.success) throw invalidParams(AgentsMethods.run, parsed.error.issues);
  const { name } = parsed.data;
  const input = parsed.data.input as JsonValue | undefined;
  // Resolving first answers an unknown name with -32602 before anything runs, whatever the source.
  if ((await source.get(name)) === undefined) {
    throw new UnknownAgentError(name);
  }
  const stream = new DeltaStream(context);
  const report = context.onRunEvent ?? (() => {});
  const onAbort = () => report({ type: "cancelled", agent: name, deltas: stream.count });
  context.signal.addEventListener("abort", onAbort, { once: true });
  report({ type: "started", agent: name, streaming: context.progressToken !== undefined });
  try {
    const output = await source.run(name, input, {
      signal: context.signal,
      emit: (delta) => stream.emit(delta),
    });
    // The final delta (if any) makes the streamed deltas combine to exactly this output.
    await stream.finish(output);
    if (!context.signal.aborted) report({ type: "completed", agent: name, deltas: stream.count });
    return { output };
  } catch (err) {
    stream.close();
    const failure = asRpcError(name, err);
    if (!context.signal.aborted) report({ type: "failed", agent: name, error: failure.message });
    throw failure;
  } finally {
    context.signal.removeEventListener("abort", onAbort);
  }
}

/**
 * The deltas of one run: checks each combines with the previous ones, sends them in order (each
 * followed by a standard `notifications/progress`, which resets SDK clients' request timeouts).
 */
class DeltaStream {
  count = 0;
  #accumulated: JsonValue | undefined;
  #closed = false;
  #sending: Promise<void> = Promise.resolve();
  readonly #context: RunRequestContext;

  constructor(context: RunRequestContext) {
    this.#context = context;
  }

  emit(delta: JsonValue): Promise<void> {
    if (this.#closed) throw new Error("emit() was called after the agent's run had finished");
    this.#accumulated = combineDelta(this.#accumulated, delta);
    return this.#send(delta);
  }

  async finish(output: JsonValue): Promise<void> {
    if (this.#context.progressToken !== undefined) {
      const last = remainingDelta(this.#accumulated, output);
      if (last !== undefined) {
        this.#accumulated = output;
        void this.#send(last);
      }
    }
    this.close();
    await this.#sending;
  }

  close(): void {
    this.#closed = true;
  }

  #send(delta: JsonValue): Promise<void> {
    const progressToken = this.#context.progressToken;
    if (progressToken === undefined) return Promise.resolve();
    const progress = ++this.count;
    const { notify, signal } = this.#context;
    // Chained, so notifications keep their order and the result is only sent after the last one.
    this.#sending = this.#sending.then(async () => {
      if (signal.aborted) return;
      try {
        if (this.#context.deltasAs === "progress") {
          const message = JSON.stringify(delta);
          await notify({ method: McpNotifications.progress, params: { progressToken, progress, message } });
          return;
        }
        await notify({ method: AgentsMethods.runProgress, params: { progressToken, delta } });
        await notify({ method: McpNotifications.progress, params: { progressToken, progress } });
      } catch {
        // A transport that cannot send is closing; the SDK aborts the run's signal, which the agent sees.
      }
    });
    return this.#sending;
  }
}

function invalidParams(method: string, issues: Parameters<typeof describeIssues>[0]): InvalidParamsError {
  const described = describeIssues(issues);
  return new InvalidParamsError(
    `invalid ${method} params: ${described.summary}`,
    problemsOf(issues, "/params"),
    {
      issues: described.issues,
    },
  );
}

/** Agent failures become -32603 naming the agent; errors already meant for the wire pass through. */
function asRpcError(agent: string, err: unknown): AgentsRpcError {
  if (err instanceof AgentsRpcError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new AgentsRpcError(JsonRpcErrorCodes.InternalError, `agent "${agent}" failed: ${message}`, {
    agent,
  });
}
