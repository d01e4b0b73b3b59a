/**
 * The wire format of the MCP agents capability: method and notification names, the
 * shapes of their params and results (zod schemas, used by both the server and the client), and the
 * JSON-RPC errors they answer with. Independent of the MCP SDK.
 */
import { z } from "zod";
import type { JsonObject, JsonValue } from "./json.js";

/** The server capability key: `capabilities.agents` (top level), mirrored as `capabilities.experimental.agents`. */
export const AGENTS_CAPABILITY = "agents";

export const AgentsMethods = {
  list: "agents/list",
  run: "agents/run",
  runProgress: "notifications/agents/run/progress",
} as const;

/** Standard MCP notifications the capability relies on. */
export const McpNotifications = {
  progress: "notifications/progress",
  cancelled: "notifications/cancelled",
} as const;

export const JsonRpcErrorCodes = {
  InvalidParams: -32602,
  InternalError: -32603,
  /** MCP's code for a request that timed out on the client. */
  RequestTimeout: -32001,
} as const;

export type ProgressToken = string | number;
export type JsonSchema = JsonObject;

export interface AgentDescriptor {
  name: string;
  description?: string;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
}

export interface AgentPage {
  agents: AgentDescriptor[];
  nextCursor?: string;
}

export interface AgentsRunResult {
  output: JsonValue;
}

export interface RunProgressParams {
  progressToken: ProgressToken;
  delta: JsonValue;
}

const ProgressTokenSchema = z.union([z.string(), z.number()]);
const JsonSchemaSchema = z.record(z.string(), z.json());

export const AgentsListParamsSchema = z.looseObject({ cursor: z.string().optional() });

export const AgentsRunParamsSchema = z.looseObject({
  name: z.string().min(1, "the agent name must be a non-empty string"),
  // Already JSON (it came off the wire); the agent's own schema validates it.
  input: z.unknown().optional(),
});

export const AgentDescriptorSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().optional(),
  inputSchema: JsonSchemaSchema,
  outputSchema: JsonSchemaSchema,
});

export const AgentsListResultSchema = z.looseObject({
  agents: z.array(AgentDescriptorSchema),
  nextCursor: z.string().optional(),
});

export const AgentsRunResultSchema = z.looseObject({ output: z.json() });

export const RunProgressParamsSchema = z.looseObject({ progressToken: ProgressTokenSchema, delta: z.json() });

export const ProgressParamsSchema = z.looseObject({
  progressToken: ProgressTokenSchema,
  progress: z.number(),
});

/** Turns zod issues into the `data.issues` of a -32602 answer and a one-line summary for its message. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): {
  summary: string;
  issues: { path: (string | number)[]; code: string; message: string }[];
} {
  const list = issues.map((issue) => ({
    path: issue.path.map((part) => (typeof part === "symbol" ? String(part) : part)),
    code: issue.code,
    message: issue.message,
  }));
  const summary = list
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message))
    .join("; ");
  return { summary, issues: list };
}
