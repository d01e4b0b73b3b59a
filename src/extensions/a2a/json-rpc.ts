/**
 * What the bridge accepts from A2A clients, checked before the A2A SDK's handler sees it so that a
 * bad payload is answered with a JSON-RPC error naming the field (the SDK alone would answer
 * "Invalid method parameters." or silently default a missing field). Shapes are A2A 1.0's JSON
 * (ProtoJSON, camelCase) and, for the methods with a `/` in their name, A2A 0.3's.
 */
import { z } from "zod";

/** A2A's JSON-RPC error codes (A2A 1.0 §9.5); the JSON-RPC 2.0 ones where A2A has none. */
export const A2AErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  TaskNotFound: -32001,
  TaskNotCancelable: -32002,
  PushNotificationNotSupported: -32003,
  UnsupportedOperation: -32004,
  ContentTypeNotSupported: -32005,
  VersionNotSupported: -32009,
} as const;

export interface FieldViolation {
  field: string;
  description: string;
}

/** A JSON-RPC error in A2A 1.0's form: `data` is a list of google.rpc details; BadRequest names the fields. */
export class A2ARpcError extends Error {
  /** The JSON-RPC id of the request it answers, once known. */
  requestId: string | number | null = null;

  constructor(
    readonly code: number,
    message: string,
    readonly violations: FieldViolation[] = [],
  ) {
    super(message);
  }

  toJSON(): { code: number; message: string; data?: unknown[] } {
    if (this.violations.length === 0) return { code: this.code, message: this.message };
    return {
      code: this.code,
      message: this.message,
      data: [{ "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: this.violations }],
    };
  }
}

// Messages say what is wrong, not where: the violation's field names the place.
const NON_EMPTY = z.string().trim().min(1, "must be a non-empty string");

/** A part carries exactly one of text, raw (base64), url or data (A2A 1.0 §4.1.6). */
const HISTORY_LENGTH = z.int("must be an integer").min(0, "must be 0 or more");
/** A2A 1.0 task states, the inbound checks' and the outbound client's alike. */
export const TASK_STATES = [
  "TASK_STATE_UNSPECIFIED",
  "TASK_STATE_SUBMITTED",
  "TASK_STATE_WORKING",
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_INPUT_REQUIRED",
  "TASK_STATE_REJECTED",
  "TASK_STATE_AUTH_REQUIRED",
] as const;

const PartV1 = z
  .looseObject({
    text: z.string().optional(),
    raw: z.string().optional(),
    url: z.string().optional(),
    data: z.unknown().optional(),
    mediaType: z.string().optional(),
    filename: z.string().optional(),
  })
  .refine(
    (part) => ["text", "raw", "url", "data"].filter((k) => part[k] !== undefined).length === 1,
    "a part must have exactly one of text, raw, url or data",
  );

const MessageV1 = z.looseObject({
  messageId: NON_EMPTY,
  role: z.enum(["ROLE_USER", "ROLE_AGENT"], "must be ROLE_USER or ROLE_AGENT"),
  parts: z.array(PartV1).min(1, "a message needs at least one part"),
  contextId: z.string().optional(),
  taskId: z.string().optional(),
});

const PushConfigV1 = z.looseObject({
  url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
  id: z.string().optional(),
  token: z.string().optional(),
  taskId: z.string().optional(),
});

const SendMessageV1 = z.looseObject({
  message: MessageV1,
  configuration: z
    .looseObject({
      historyLength: HISTORY_LENGTH.optional(),
      returnImmediately: z.boolean().optional(),
      acceptedOutputModes: z.array(z.string()).optional(),
      taskPushNotificationConfig: PushConfigV1.optional(),
    })
    .optional(),
});

const ListTasksV1 = z.looseObject({
  contextId: z.string().optional(),
  status: z
    .union(
      [
        z.enum(TASK_STATES),
        z
          .int()
          .min(0)
          .max(TASK_STATES.length - 1),
      ],
      "must be a TaskState",
    )
    .optional(),
  pageSize: z
    .int("must be an integer")
    .min(1, "must be 1 or more")
    .max(100, "must be 100 or less")
    .optional(),
  pageToken: z.string().optional(),
  historyLength: HISTORY_LENGTH.optional(),
  statusTimestampAfter: z.iso
    .datetime({ offset: true, error: "must be an RFC 3339 timestamp, e.g. 2026-01-31T09:00:00Z" })
    .optional(),
  includeArtifacts: z.boolean().optional(),
});

const TaskIdV1 = z.looseObject({
  id: NON_EMPTY,
  historyLength: HISTORY_LENGTH.optional(),
});
const PushConfigRefV1 = z.looseObject({ taskId: NON_EMPTY, id: z.string().optional() });

const PartV03 = z.looseObject({ kind: z.enum(["text", "file", "data"], "must be text, file or data") });
const MessageV03 = z.looseObject({
  messageId: NON_EMPTY,
  role: z.enum(["user", "agent"], "must be user or agent"),
  parts: z.array(PartV03).min(1, "a message needs at least one part"),
});

const SendMessageV03 = z.looseObject({
  message: MessageV03,
  configuration: z
    .looseObject({
      pushNotificationConfig: z
        .looseObject({ url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }) })
        .optional(),
    })
    .optional(),
});

/** Params schema per method; a method not listed here is not served. */
export const A2A_METHODS: Record<string, z.ZodType> = {
  SendMessage: SendMessageV1,
  SendStreamingMessage: SendMessageV1,
  GetTask: TaskIdV1,
  CancelTask: TaskIdV1,
  SubscribeToTask: TaskIdV1,
  ListTasks: ListTasksV1,
  CreateTaskPushNotificationConfig: PushConfigV1.extend({ taskId: NON_EMPTY }),
  GetTaskPushNotificationConfig: PushConfigRefV1.extend({ id: NON_EMPTY }),
  ListTaskPushNotificationConfigs: PushConfigRefV1,
  DeleteTaskPushNotificationConfig: PushConfigRefV1.extend({ id: NON_EMPTY }),
  GetExtendedAgentCard: z.looseObject({}).optional(),
  // A2A 0.3 names, answered by the SDK's compatibility layer.
  "message/send": SendMessageV03,
  "message/stream": SendMessageV03,
  "tasks/get": z.looseObject({ id: NON_EMPTY }),
  "tasks/cancel": z.looseObject({ id: NON_EMPTY }),
  "tasks/resubscribe": z.looseObject({ id: NON_EMPTY }),
  "tasks/pushNotificationConfig/set": z.looseObject({
    taskId: NON_EMPTY,
    pushNotificationConfig: z.looseObject({ url: z.url({ protocol: /^https?$/ }) }),
  }),
  "tasks/pushNotificationConfig/get": z.looseObject({ id: NON_EMPTY }),
  "tasks/pushNotificationConfig/list": z.looseObject({ id: NON_EMPTY }),
  "tasks/pushNotificationConfig/delete": z.looseObject({ id: NON_EMPTY }),
};

export const isLegacyMethod = (method: string): boolean => method.includes("/");

/** The A2A versions the gateway speaks (`Major.Minor`, A2A 1.0 §3.6). */
export const A2A_VERSIONS = ["0.3", "1.0"] as const;
export type A2AVersion = (typeof A2A_VERSIONS)[number];
export const A2A_VERSION_HEADER = "A2A-Version";

/**
 * The version a request asks for, from its `A2A-Version` header or query parameter: none or empty
 * is 0.3 (A2A 1.0 §3.6.2), a patch number is ignored. Undefined: a version the gateway does not speak.
 */
export function requestedA2AVersion(asked: string): A2AVersion | undefined {
  if (asked.trim() === "") return "0.3";
  const match = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(asked.trim());
  const version = match ? `${Number(match[1])}.${Number(match[2])}` : undefined;
  return A2A_VERSIONS.find((supported) => supported === version);
}

/** What a request names as its version: the `A2A-Version` header, else that query parameter (A2A 1.0 §3.6.1); "" when neither. */
export function askedA2AVersion(header: string | string[] | undefined, url: URL): string {
  return (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get(A2A_VERSION_HEADER) ?? "";
}

/** VersionNotSupported (-32009) naming the version asked for and those served. */
export function versionNotSupported(asked: string, requestId: A2ACall["id"] = null): A2ARpcError {
  const err = new A2ARpcError(
    A2AErrorCode.VersionNotSupported,
    `A2A version ${JSON.stringify(asked)} is not supported here: send ${A2A_VERSION_HEADER} ${A2A_VERSIONS.join(" or ")}`,
    [{ field: A2A_VERSION_HEADER, description: `must be one of ${A2A_VERSIONS.join(", ")}` }],
  );
  err.requestId = requestId;
  return err;
}

const RequestId = z.union([z.string(), z.number(), z.null()], "must be a string, a number or null");
const Envelope = z.object({
  jsonrpc: z.literal("2.0", 'must be exactly "2.0"'),
  id: RequestId.optional(),
  method: z.string("must be a string"),
  params: z.unknown().optional(),
});

export interface A2ACall {
  id: string | number | null;
  method: string;
  params: Record<string, unknown> | undefined;
}

const fieldOf = (root: string, path: readonly PropertyKey[]) =>
  [root, ...path.map(String)].join(".").replace(/\.(\d+)(?=\.|$)/g, "[$1]");

/** Validates a parsed JSON-RPC request body; throws an A2ARpcError naming the offending field. */
export function checkA2ACall(body: unknown): A2ACall {
  const envelope = Envelope.safeParse(body);
  if (!envelope.success) {
    const violations = envelope.error.issues.map((i) => ({
      field: fieldOf("", i.path).slice(1) || "(body)",
      description: i.message,
    }));
    const err = new A2ARpcError(
      A2AErrorCode.InvalidRequest,
      `invalid JSON-RPC request: ${violations.map((v) => `${v.field} ${v.description}`).join("; ")}`,
      violations,
    );
    // Answered with the request's id when it has a usable one, whatever else is wrong.
    const id = RequestId.safeParse((body as { id?: unknown } | null)?.id);
    if (id.success) err.requestId = id.data;
    throw err;
  }
  const { method, params } = envelope.data;
  const id = envelope.data.id ?? null;
  const schema = A2A_METHODS[method];
  if (!schema) {
    const err = new A2ARpcError(A2AErrorCode.MethodNotFound, `unknown A2A method ${JSON.stringify(method)}`, [
      { field: "method", description: `not one of ${Object.keys(A2A_METHODS).join(", ")}` },
    ]);
    err.requestId = id;
    throw err;
  }
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    const violations = parsed.error.issues.map((i) => ({
      field: fieldOf("params", i.path),
      description: i.message,
    }));
    const first = violations[0];
    const err = new A2ARpcError(
      A2AErrorCode.InvalidParams,
      `invalid params for ${method}: ${first?.field}: ${first?.description}`,
      violations,
    );
    err.requestId = id;
    throw err;
  }
  return { id, method, params: params as Record<string, unknown> | undefined };
}
