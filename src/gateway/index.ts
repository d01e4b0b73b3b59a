/**
 * `acp-kit/gateway`: the gateway core (`startGateway`), what an extension is given and implements,
 * and the shapes of the REST and WebSocket API. The default gateway, with the dashboard,
 * collaboration, the MCP endpoint and approvals mounted, is `startDefaultGateway` in
 * `acp-kit/server`. Secret hashing, credential parsing and the gateway's version table are its
 * own: import them from their module files inside this package.
 */
export { Router, readJsonBody, sendError, sendJson } from "../http/server.js";
export {
  AgentList,
  AgentView,
  PresenceUpdateRequest,
  PresenceView,
  RegisterAgentRequest,
  RegisterAgentResponse,
  RevokedAgent,
} from "../wire/agents.js";
export {
  API_PREFIX,
  ClientFrame,
  CONSUME_PARAM,
  DASHBOARD_API,
  type HandshakeProofView,
  KeyHistoryEntry,
  MAX_ACK_PENDING_PARAM,
  PHOENIX_SOCKET_PATH,
  Presence,
  PresenceState,
  PresenceUpdate,
  type PrincipalView,
  PriorityInput,
  ProtocolVersion,
  RotateSigningKeyRequest,
  type ServerFrame,
  SubmitResponse,
  TaskProgress,
  WS_PATH,
} from "../wire/api.js";
export { type WithDeprecatedNames, withCurrentNames, withDeprecatedNames } from "../wire/deprecated-names.js";
export {
  negotiateVersion,
  PROTOCOL_VERSIONS,
  type ProtocolVersionEntry,
  type ProtocolVersionView,
  type VersionDeprecation,
  type VersionStatus,
} from "../wire/versions.js";
export {
  checkAdminTokenStrength,
  MIN_ADMIN_TOKEN_BITS,
  MIN_ADMIN_TOKEN_LENGTH,
  newAdminToken,
  newApiKey,
} from "./auth.js";
export type { GatewayContext } from "./context.js";
export { announceDeprecation, authenticate, authenticateAgent, requireAdmin } from "./context.js";
export { type Caller, type CallerKind, Credentials } from "./credentials.js";
export type { ExtensionHooks, GatewayExtension } from "./extension.js";
export { startGateway } from "./gateway.js";
export type { Gateway, GatewayOptions } from "./gateway-options.js";
export type { HealthReport } from "./health.js";
export { Metrics } from "./metrics.js";
export {
  type DashboardPanel,
  type DashboardWatch,
  PANEL_NAME,
  type PanelItem,
  type PanelMessage,
  type PanelScope,
  type PanelSources,
} from "./panels.js";
export { type PrincipalRecord, PrincipalStore } from "./principals.js";
export { type AgentRecord, Registry } from "./registry.js";
export type { AcceptedListener, AcceptedMessage } from "./relay-types.js";
