/**
 * What travels between the gateway's MCP endpoint and ACP agents, shared by the gateway (which
 * carries MCP runs as ACP requests) and the agent SDK (which serves them, `serveMcpAgent`):
 * method names, bodies, the published descriptor, and the `acp/sign` request the gateway sends to
 * MCP clients that hold their agent's key. Independent of the MCP SDK.
 */
import { z } from "zod";

/** ACP methods of an MCP run carried to an agent. */
export const McpRunMethods = {
  /** Request: `{name, input, runId, onBehalfOf}` → response `{output, deltas}`. */
  run: "agent.mcp.run",
  /** Notification from the agent running: `{runId, seq, delta}` (seq counts from 1). */
  progress: "agent.mcp.progress",
  /** Notification to the agent running: `{runId}`; its run's AbortSignal fires. */
  cancel: "agent.mcp.cancel",
} as const;

/** The principal of the gateway's own bridge agents (hidden from `agents/list`). */
export const BRIDGE_PRINCIPAL = "acp-gateway-mcp";

/** MCP agent names an ACP agent publishes: the same rule as `AgentRegistry` names. */
export const McpAgentName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$/,
    "must be letters, digits, _ . - (no leading, trailing or double dots)",
  )
  .max(128, "must be at most 128 characters");

const JsonSchemaObject = z.record(z.string(), z.json());

/** `PUT /api/v1/mcp/agents/{name}`: what `agents/list` shows for `<agent-id>/<name>`. */
export const PublishedAgentBody = z.strictObject({
  description: z.string().max(2000).optional(),
  inputSchema: JsonSchemaObject,
  outputSchema: JsonSchemaObject,
});
export type PublishedAgentBody = z.infer<typeof PublishedAgentBody>;

export const RunIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{8,64}$/, "must be 8-64 characters of A-Z a-z 0-9 _ -");

export const McpRunBody = z.looseObject({
  name: McpAgentName,
  input: z.json().optional(),
  runId: RunIdSchema,
  /** The MCP caller the gateway authenticated (by API key) and runs this for. */
  onBehalfOf: z.looseObject({ agentId: z.string(), principalId: z.string() }).optional(),
});
export type McpRunBody = z.infer<typeof McpRunBody>;

export const McpRunResult = z.looseObject({ output: z.json(), deltas: z.int().nonnegative() });
export type McpRunResult = z.infer<typeof McpRunResult>;

export const McpProgressBody = z.looseObject({
  runId: RunIdSchema,
  seq: z.int().positive(),
  delta: z.json(),
});
export type McpProgressBody = z.infer<typeof McpProgressBody>;

export const McpCancelBody = z.looseObject({ runId: RunIdSchema });

/**
 * `acp/sign`, a request from the gateway to its MCP client: "sign this ACP notification as the
 * agent you are". Only clients that declare `capabilities.experimental.acpSigning` get it; the key
 * never leaves them. Used by the task tools, whose changes must carry the agent's own signature.
 */
export const ACP_SIGN_METHOD = "acp/sign";
export const ACP_SIGNING_CAPABILITY = "acpSigning";

/** Methods a signing client agrees to sign for the gateway: the task lifecycle and nothing else. */
export const SIGNABLE_METHODS = [
  "agent.handoff.accept",
  "agent.handoff.decline",
  "agent.handoff.complete",
  "agent.handoff.fail",
  "agent.handoff.progress",
] as const;

export const AcpSignParams = z.looseObject({
  method: z.enum(SIGNABLE_METHODS),
  to: z.string().min(1),
  body: z.record(z.string(), z.json()),
  trustLayerVersion: z.string().min(1),
  /** One line for the person whose key signs (the proxy logs it). */
  purpose: z.string().max(500),
});
export type AcpSignParams = z.infer<typeof AcpSignParams>;

export const AcpSignResult = z.looseObject({ message: z.record(z.string(), z.unknown()) });
