/** `acp-kit/mcp`: the MCP agents capability: delta algorithm, server, client. */

export {
  type AgentDefinition,
  type AgentHandler,
  AgentRegistry,
  type AgentRegistryOptions,
  type AgentRunContext,
  type AgentSource,
} from "./agent-source.js";
export { AgentToolNames, type AgentToolsOptions, addAgentTools } from "./agent-tools.js";
export {
  AgentsClient,
  type ConnectOptions,
  connectAgentsClient,
  type RunAgentOptions,
  type StdioServerCommand,
  stdioClientTransport,
  streamableHttpClientTransport,
} from "./client.js";
export {
  combineDelta,
  combineDeltas,
  DeltaCombineError,
  DeltaMismatchError,
  remainingDelta,
  type SplitOptions,
  splitIntoDeltas,
} from "./delta.js";
export {
  AgentInputError,
  AgentOutputError,
  AgentsRpcError,
  InvalidCursorError,
  InvalidParamsError,
  UnknownAgentError,
} from "./errors.js";
export {
  type ConnectableMcpServer,
  type McpHttpHost,
  type McpHttpHostOptions,
  serveMcpOverHttp,
} from "./http.js";
export type { JsonObject, JsonValue } from "./json.js";
export {
  AGENTS_CAPABILITY,
  type AgentDescriptor,
  type AgentPage,
  AgentsMethods,
  type AgentsRunResult,
  JsonRpcErrorCodes,
  type JsonSchema,
  McpNotifications,
  type ProgressToken,
  type RunProgressParams,
} from "./protocol.js";
export {
  ACP_SIGNING_CAPABILITIES,
  type AcpSigningOptions,
  registerAcpSigning,
  signForGateway,
} from "./proxy-signing.js";
export {
  AgentsMcpServer,
  type AgentsMcpServerOptions,
  createAgentsMcpServer,
  type Transport,
} from "./sdk-adapter.js";
export type { AgentRunEvent } from "./server.js";
