export * from "./auth.js";
export type { GatewayContext } from "./context.js";
export { authenticate, authenticateAgent, requireAdmin } from "./context.js";
export { type Caller, type CallerKind, Credentials } from "./credentials.js";
export type { GatewayExtension } from "./extension.js";
export {
  PRINCIPAL_TOKENS_BUCKET,
  PRINCIPALS_BUCKET,
  type PrincipalRecord,
  PrincipalStore,
  type PrincipalView,
} from "./principals.js";
export type { AcceptedListener, AcceptedMessage } from "./relay.js";
export * from "./gateway.js";
export type { HealthReport } from "./health.js";
export { httpStatusOf, Router, readJsonBody, sendError, sendJson } from "./http.js";
export { Metrics } from "./metrics.js";
export { type AgentRecord, negotiateVersion, Registry } from "./registry.js";
export * from "./wire.js";
