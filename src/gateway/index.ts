/**
 * `acp-kit/gateway`: the gateway core (`startGateway`) and what an extension is given and
 * implements. The default gateway, with the dashboard, collaboration, the MCP endpoint and
 * approvals mounted, is `startDefaultGateway` in `acp-kit/server`.
 */
export { Router, readJsonBody, sendError, sendJson } from "../http/server.js";
export * from "../wire/api.js";
export * from "../wire/versions.js";
export * from "./auth.js";
export type { GatewayContext } from "./context.js";
export { announceDeprecation, authenticate, authenticateAgent, requireAdmin } from "./context.js";
export { type Caller, type CallerKind, Credentials } from "./credentials.js";
export type { ExtensionHooks, GatewayExtension } from "./extension.js";
export * from "./gateway.js";
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
export {
  PRINCIPAL_TOKENS_BUCKET,
  PRINCIPALS_BUCKET,
  type PrincipalRecord,
  PrincipalStore,
} from "./principals.js";
export { type AgentRecord, Registry } from "./registry.js";
export type { AcceptedListener, AcceptedMessage } from "./relay.js";
