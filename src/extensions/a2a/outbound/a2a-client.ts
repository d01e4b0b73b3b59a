import { randomUUID } from "node:crypto";
import { z } from "zod";
import { type OutboundPolicy, OutboundResponseTooLarge, OutboundUrlRefused } from "../../../http/outbound.js";
import { sseData } from "../../../http/sse.js";
import { TASK_STATES } from "../json-rpc.js";
import { A2A_VERSION, causeOf } from "./card.js";
import { fromLegacyResult, legacyMethod, toLegacyParams } from "./legacy.js";

/**
 * A small A2A 1.0 JSON-RPC client for the outbound bridge: `SendMessage`, `SendStreamingMessage`
 * (SSE), `GetTask`, `CancelTask`. Every answer is validated (zod) before use; each failure is an
 * A2AFailure saying whether the agent was unreachable, answered something that is not A2A, or
 * answered with a JSON-RPC error of its own, or whether the gateway's outbound URL policy refused
 * the endpoint's address. Calls go through that policy, and an answer (a whole event stream too) is
 * read up to RESPONSE_LIMIT bytes: past it the connection is closed, nothing more is buffered.
 *
 * Why not the A2A SDK's client (which the inbound side's tests use as a caller): the gateway calls
 * addresses that strangers register, so every connection must go through the outbound URL policy
 * (resolved address checked and pinned, no redirects followed), every answer must be size-bounded,
 * and an A2A 0.3 agent must be reachable from the same code. The SDK's client fetches with the
 * platform's `fetch`, which offers none of these hooks.
 */
export const Part = z.looseObject({
  text: z.string().optional(),
  url: z.string().optional(),
  raw: z.string().optional(),
  data: z.unknown().optional(),
  mediaType: z.string().optional(),
  filename: z.string().optional(),
});
export const A2AMessage = z.looseObject({
  messageId: z.string().min(1),
  contextId: z.string().optional(),
  taskId: z.string().optional(),
  role: z.string(),
  parts: z.array(Part),
});
export const TaskState = z.enum(TASK_STATES);
const TaskStatus = z.looseObject({
  state: TaskState,
  message: A2AMessage.optional(),
  timestamp: z.string().optional(),
});
export const Artifact = z.looseObject({
  artifactId: z.string().min(1),
  name: z.string().optional(),
  description: z.string().optional(),
  parts: z.array(Part),
});
export const A2ATask = z.looseObject({
  id: z.string().min(1),
  contextId: z.string().optional(),
  status: TaskStatus,
  artifacts: z.array(Artifact).optional(),
  history: z.array(A2AMessage).optional(),
});
const SendResult = z.union([z.object({ task: A2ATask }), z.object({ message: A2AMessage })]);
export const StreamEvent = z.union([
  z.object({ task: A2ATask }),
  z.object({ message: A2AMessage }),
  z.object({
    statusUpdate: z.looseObject({
      taskId: z.string().min(1),
      contextId: z.string().optional(),
      status: TaskStatus,
    }),
  }),
  z.object({
    artifactUpdate: z.looseObject({
      taskId: z.string().min(1),
      artifact: Artifact,
      append: z.boolean().optional(),
      lastChunk: z.boolean().optional(),
    }),
  }),
]);
export type Part = z.infer<typeof Part>;
export type A2AMessage = z.infer<typeof A2AMessage>;
export type A2ATask = z.infer<typeof A2ATask>;
export type Artifact = z.infer<typeof Artifact>;
export type TaskState = z.infer<typeof TaskState>;
export type StreamEvent = z.infer<typeof StreamEvent>;
export type SendResult = z.infer<typeof SendResult>;

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED",
]);
/** States where the task waits for the client: the call is over for now. */
export const INTERRUPTED_STATES: ReadonlySet<TaskState> = new Set([
  "TASK_STATE_INPUT_REQUIRED",
  "TASK_STATE_AUTH_REQUIRED",
]);

export type A2AFailureKind = "unreachable" | "bad-response" | "remote-error" | "refused";

export class A2AFailure extends Error {
  constructor(
    readonly kind: A2AFailureKind,
    message: string,
    readonly remote?: { code: number; message: string },
  ) {
    super(message);
    this.name = "A2AFailure";
  }
}

const RpcError = z.object({ code: z.number(), message: z.string(), data: z.unknown().optional() });
const RpcAnswer = z.union([
  z.object({ jsonrpc: z.literal("2.0"), result: z.unknown() }),
  z.object({ jsonrpc: z.literal("2.0"), error: RpcError }),
]);

export const RESPONSE_LIMIT = 8 * 1024 * 1024;

export class A2AClient {
  private readonly headers: Record<string, string>;
  private readonly legacy: boolean;
  private readonly timeoutMs: number;

  constructor(
    readonly endpoint: string,
    private readonly outbound: OutboundPolicy,
    options: {
      /** Credentials' headers, sent on every call. */
      headers?: Record<string, string>;
      /** An A2A 0.3 agent: 0.3 method names and shapes on the wire (legacy.ts). */
      legacy?: boolean;
      timeoutMs?: number;
    } = {},
  ) {
    this.headers = options.headers ?? {};
    this.legacy = options.legacy ?? false;
    this.timeoutMs = options.timeoutMs ?? 10 * 60_000;
  }

  /** `returnImmediately`: answer with the task as soon as it exists instead of when it is over. */
  async sendMessage(
    message: Record<string, unknown>,
    returnImmediately: boolean,
    signal?: AbortSignal,
  ): Promise<SendResult> {
    const result = await this.call("SendMessage", { message, configuration: { returnImmediately } }, signal);
    return this.check(SendResult, result, "SendMessage");
  }

  async getTask(id: string): Promise<A2ATask> {
    return this.check(A2ATask, await this.call("GetTask", { id }), "GetTask");
  }

  async cancelTask(id: string): Promise<A2ATask> {
    return this.check(A2ATask, await this.call("CancelTask", { id }), "CancelTask");
  }

  /** The events of `SendStreamingMessage`, validated one by one, until the agent ends the stream. */
  async *streamMessage(message: Record<string, unknown>, signal?: AbortSignal): AsyncGenerator<StreamEvent> {
    const response = await this.post("SendStreamingMessage", { message }, signal, "text/event-stream");
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream")) {
      // An error before the stream starts comes back as one JSON-RPC answer.
      this.unwrap(await this.readJson(response, "SendStreamingMessage"), "SendStreamingMessage");
      throw new A2AFailure(
        "bad-response",
        `SendStreamingMessage answered ${type || "no content type"}, not an event stream`,
      );
    }
    if (!response.body) throw new A2AFailure("bad-response", "SendStreamingMessage answered an empty stream");
    try {
      for await (const data of sseData(response.body)) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          throw new A2AFailure("bad-response", "SendStreamingMessage sent an event that is not JSON");
        }
        const event = this.fromWire("SendStreamingMessage", this.unwrap(parsed, "SendStreamingMessage"));
        yield this.check(StreamEvent, event, "SendStreamingMessage");
      }
    } catch (err) {
      if (err instanceof A2AFailure) throw err;
      if (err instanceof OutboundResponseTooLarge)
        throw new A2AFailure(
          "bad-response",
          `SendStreamingMessage: the stream exceeds ${RESPONSE_LIMIT} bytes`,
        );
      throw new A2AFailure("unreachable", `the event stream from ${this.endpoint} broke: ${causeOf(err)}`);
    }
  }

  private async call(method: string, params: unknown, signal?: AbortSignal): Promise<unknown> {
    const response = await this.post(method, params, signal, "application/json");
    return this.fromWire(method, this.unwrap(await this.readJson(response, method), method));
  }

  private fromWire(method: string, result: unknown): unknown {
    return this.legacy ? fromLegacyResult(method, result) : result;
  }

  private async post(method: string, params: unknown, signal: AbortSignal | undefined, accept: string) {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let response: Response;
    try {
      response = await this.outbound.fetch(this.endpoint, {
        method: "POST",
        headers: {
          ...this.headers,
          "content-type": "application/json",
          accept,
          ...(!this.legacy && { "A2A-Version": A2A_VERSION }),
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: randomUUID(),
          method: this.legacy ? legacyMethod(method) : method,
          params: this.legacy ? toLegacyParams(method, params as Record<string, unknown>) : params,
        }),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        maxResponseBytes: RESPONSE_LIMIT,
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof OutboundUrlRefused)
        throw new A2AFailure("refused", `the gateway does not call the A2A agent's endpoint ${err.message}`);
      if (err instanceof OutboundResponseTooLarge)
        throw new A2AFailure("bad-response", `${method}: the answer exceeds ${RESPONSE_LIMIT} bytes`);
      throw new A2AFailure(
        "unreachable",
        `the A2A agent at ${this.endpoint} is unreachable (${causeOf(err)})`,
      );
    }
    if (response.status >= 500 || response.status === 429) {
      await response.body?.cancel();
      throw new A2AFailure(
        "unreachable",
        `the A2A agent at ${this.endpoint} answered HTTP ${response.status} to ${method}`,
      );
    }
    if (response.status === 401 || response.status === 403) {
      await response.body?.cancel();
      const given = Object.keys(this.headers);
      throw new A2AFailure(
        "remote-error",
        `the A2A agent at ${this.endpoint} answered HTTP ${response.status} to ${method}: ` +
          (given.length > 0
            ? `it refused the bridge's credentials (${given.join(", ")}); register it again with the right ones`
            : "it needs credentials; register it again with --header or --bearer-env"),
      );
    }
    return response;
  }

  private async readJson(response: Response, method: string): Promise<unknown> {
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      if (err instanceof OutboundResponseTooLarge)
        throw new A2AFailure("bad-response", `${method}: the answer exceeds ${RESPONSE_LIMIT} bytes`);
      throw new A2AFailure("unreachable", `the answer from ${this.endpoint} broke off: ${causeOf(err)}`);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new A2AFailure(
        "bad-response",
        `${method}: the A2A agent answered HTTP ${response.status} with non-JSON`,
      );
    }
  }

  private unwrap(answer: unknown, method: string): unknown {
    const parsed = RpcAnswer.safeParse(answer);
    if (!parsed.success)
      throw new A2AFailure("bad-response", `${method}: the answer is not a JSON-RPC 2.0 response`);
    if ("error" in parsed.data) {
      const { code, message } = parsed.data.error;
      throw new A2AFailure("remote-error", `${method} failed at the A2A agent: ${message} (${code})`, {
        code,
        message,
      });
    }
    return parsed.data.result;
  }

  private check<T>(schema: z.ZodType<T>, value: unknown, method: string): T {
    const parsed = schema.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new A2AFailure(
        "bad-response",
        `${method}: the A2A agent's result is not valid A2A ${A2A_VERSION}: /${issue?.path.join("/")} ${issue?.message}`,
      );
    }
    return parsed.data;
  }
}
