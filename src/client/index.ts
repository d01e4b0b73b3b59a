/** acp-kit/client: the agent SDK (AcpAgent) and a typed client for the gateway's REST API. */

export type { WithDeprecatedNames } from "../wire/deprecated-names.js";
export { registrationOf } from "../wire/agents.js";
export type { MessageListItem, MessageStatusView, MessageWithEnvelope } from "../wire/messages.js";
export { AcpAgent } from "./agent.js";
export type { AuditSettings } from "./audit.js";
export { CollabClient } from "./collab.js";
export type { ReconnectOptions } from "./connection.js";
export { GatewayUnreachableError, SdkError, type SdkErrorKind } from "./errors.js";
export { FederationAdminClient } from "./federation-admin.js";
export {
  type HandledDelivery,
  type HandledRecord,
  type HandledStore,
  handledKey,
  type SqliteConnection,
  SqliteHandledStore,
  type SqliteHandledStoreOptions,
} from "./handled-store.js";
export type { DegradedInfo, RecoveredInfo } from "./health.js";
export {
  GatewayClient,
  type GatewayClientOptions,
  type ListMessagesQuery,
  type MessagePage,
} from "./http.js";
export {
  type McpAgentDefinition,
  type ServedMcpAgent,
  type ServeMcpAgentOptions,
  serveMcpAgent,
} from "./mcp-agent.js";
export type { ResubmitInfo, SubmitRetryOptions } from "./outbox.js";
export { PrincipalAdminClient } from "./principals.js";
export type { BodyOf, BodySchema, RequestSchemas, TypedRequestHandler } from "./typed-handler.js";
export type {
  AcpAgentOptions,
  AgentDirectory,
  AgentEvents,
  AgentWarning,
  HandoffHandler,
  HandoffOptions,
  InboundContext,
  InboundMessage,
  NotificationHandler,
  NotifyOptions,
  PresenceInput,
  RequestHandler,
  RequestOptions,
  SendOptions,
} from "./types.js";
