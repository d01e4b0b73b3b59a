import type { z } from "zod";
import { AcpError, type Problem, problemsOf } from "./errors.js";
import {
  type AcpMessage,
  AnnounceMessage,
  CapabilitiesMessage,
  EncryptedHandoffMessage,
  EnvelopeHeaders,
  ErrorResponseMessage,
  ExtensionNotificationMessage,
  ExtensionRequestMessage,
  type Headers,
  type MessageKind,
  type MessageType,
  NOTIFICATION_METHODS,
  NotificationMessage,
  PlainHandoffMessage,
  REQUEST_METHODS,
  RequestMessage,
  ResponseMessage,
} from "./schemas.js";

/**
 * Paths whose problems make the message an invalid JSON-RPC request rather than bad params: the
 * message itself ("") and its top-level members.
 */
const STRUCTURAL = /^(\/(jsonrpc|id|method|params|result|error|signature))?$/;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Parses wire text; invalid JSON is the JSON-RPC parse error. */
export function parseMessageText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new AcpError("ParseError", "the input is not valid JSON", {
      problems: [{ path: "", message: (err as Error).message }],
    });
  }
}

/** What a valid message is: `request`, `notification`, `handoff`, `response` or `error`. */
export function messageKind(message: AcpMessage): MessageKind {
  if ("method" in message) {
    if (message.method === "agent.handoff") return "handoff";
    return "id" in message ? "request" : "notification";
  }
  return "result" in message ? "response" : "error";
}

/** The identity headers of any message (for a signed error response, `error.data.headers`). */
export function headersOf(message: AcpMessage): Headers | undefined {
  if ("params" in message) return message.params.headers;
  if ("result" in message) return message.result.headers;
  const data = message.error.data;
  return isRecord(data) && isRecord(data.headers) ? (data.headers as Headers) : undefined;
}

/**
 * The JSON Pointer of `message`'s headers (`/params/headers`, `/result/headers`,
 * `/error/data/headers`), or of one header in them: where a refusal says the fault is.
 */
export function headerPointer(message: AcpMessage, header?: string): string {
  const base =
    "params" in message ? "/params/headers" : "result" in message ? "/result/headers" : "/error/data/headers";
  return header === undefined ? base : `${base}/${header}`;
}

/** Headers of a signed error response; the routing pair is checked separately for envelopes. */
const ErrorResponseHeaders = EnvelopeHeaders.partial({ "message-id": true, "recipient-id": true });

function expectedMessageType(input: Record<string, unknown>): MessageType {
  if ("result" in input || "error" in input) return "response";
  if (input.method === "agent.handoff") return "handoff";
  if (input.method === "agent.request") return "request";
  if (typeof input.method === "string" && NOTIFICATION_METHODS.has(input.method)) return "notification";
  return "id" in input ? "request" : "notification";
}

function schemaFor(input: Record<string, unknown>, problems: Problem[]): z.ZodType | undefined {
  const shapes = ["method", "result", "error"].filter((key) => key in input);
  if (shapes.length !== 1) {
    problems.push({
      path: "",
      message:
        shapes.length === 0
          ? "must have one of method (request/notification), result (response) or error (error response)"
          : `must not have both ${shapes.join(" and ")}`,
    });
    return undefined;
  }
  if ("result" in input) return ResponseMessage;
  if ("error" in input) return ErrorResponseMessage;
  const method = input.method;
  if (typeof method !== "string") {
    problems.push({ path: "/method", message: "must be a string" });
    return undefined;
  }
  if (NOTIFICATION_METHODS.has(method) && "id" in input) {
    problems.push({ path: "/id", message: `${method} is a notification and must not have an id` });
  }
  if (REQUEST_METHODS.has(method) && !("id" in input)) {
    problems.push({ path: "/id", message: `${method} must have a unique id for response correlation` });
  }
  switch (method) {
    case "agent.request":
      return RequestMessage;
    case "agent.notification":
      return NotificationMessage;
    case "agent.handoff":
      return isEncryptedHandoff(input) ? EncryptedHandoffMessage : PlainHandoffMessage;
    case "agent.announce":
      return AnnounceMessage;
    case "agent.capabilities":
      return CapabilitiesMessage;
    default:
      return "id" in input ? ExtensionRequestMessage : ExtensionNotificationMessage;
  }
}

/** An encrypted handoff body is `{"jwe": …}`; anything else must be a plaintext handoff body. */
function isEncryptedHandoff(input: Record<string, unknown>): boolean {
  return isRecord(input.params) && isRecord(input.params.body) && "jwe" in input.params.body;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let value = root;
  for (const token of path) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[token];
  }
  return value;
}

function zodProblems(error: z.ZodError, input: unknown, prefix = ""): Problem[] {
  // zod words a missing member as a wrong type or value; say what it means.
  const missing = error.issues.map((issue) => valueAt(input, issue.path) === undefined);
  return problemsOf(error, prefix).map((problem, i) =>
    missing[i] ? { ...problem, message: "is required" } : problem,
  );
}

export interface ValidateOptions {
  /**
   * Require what a relayed envelope needs: a signature and the routing headers `message-id` and
   * `recipient-id` (for an error response: signed headers in `error.data.headers`).
   */
  envelope?: boolean;
}

/**
 * Checks a parsed message against the ACP core protocol's rules before anything else looks at it, and returns
 * it typed. Throws AcpError (-32600 structure / -32602 headers and body) listing every problem found.
 */
export function validateMessage(input: unknown, options: ValidateOptions = {}): AcpMessage {
  if (!isRecord(input)) {
    throw new AcpError("InvalidRequest", "an ACP message must be a JSON object", {
      problems: [
        { path: "", message: `expected an object, got ${Array.isArray(input) ? "an array" : typeof input}` },
      ],
    });
  }
  const problems: Problem[] = [];
  const schema = schemaFor(input, problems);
  if (schema) {
    const parsed = schema.safeParse(input);
    if (!parsed.success) problems.push(...zodProblems(parsed.error, input));
  }
  checkHeaderConsistency(input, problems, options);
  if (options.envelope && typeof input.signature !== "string" && problems.length === 0) {
    throw new AcpError("SignatureMissing", "the message carries no signature", {
      problems: [{ path: "/signature", message: "every relayed message must be signed" }],
    });
  }
  if (problems.length > 0) {
    const structural = problems.some((p) => STRUCTURAL.test(p.path));
    throw new AcpError(
      structural ? "InvalidRequest" : "InvalidParams",
      structural ? "not a valid ACP JSON-RPC message" : "malformed or missing headers or body",
      { problems },
    );
  }
  return input as AcpMessage;
}

/** message-type must agree with the method; envelopes need their routing headers. */
function checkHeaderConsistency(
  input: Record<string, unknown>,
  problems: Problem[],
  options: ValidateOptions,
): void {
  let headers: unknown;
  let path: string;
  if (isRecord(input.params)) {
    headers = input.params.headers;
    path = "/params/headers";
  } else if (isRecord(input.result)) {
    headers = input.result.headers;
    path = "/result/headers";
  } else if (isRecord(input.error) && isRecord(input.error.data) && "headers" in input.error.data) {
    headers = input.error.data.headers;
    path = "/error/data/headers";
    const parsed = ErrorResponseHeaders.safeParse(headers);
    if (!parsed.success) problems.push(...zodProblems(parsed.error, headers, path));
  } else {
    if (options.envelope && "error" in input) {
      problems.push({
        path: "/error/data/headers",
        message: "a relayed error response must carry signed headers",
      });
    }
    return;
  }
  if (!isRecord(headers)) return;
  const expected = expectedMessageType(input);
  const declared = headers["message-type"];
  if (
    typeof declared === "string" &&
    declared !== expected &&
    !problems.some((p) => p.path === `${path}/message-type`)
  ) {
    problems.push({
      path: `${path}/message-type`,
      message: `must be "${expected}" for this message, not "${declared}"`,
    });
  }
  if (options.envelope) {
    for (const name of ["message-id", "recipient-id"]) {
      if (!(name in headers))
        problems.push({ path: `${path}/${name}`, message: "is required on a relayed envelope" });
    }
  }
}
