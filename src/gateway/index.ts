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
} from "./principals.js";
export type { AcceptedListener, AcceptedMessage } from "./relay.js";
export * from "./gateway.js";
export type { HealthReport } from "./health.js";
export { httpStatusOf, Router, readJsonBody, sendError, sendJson } from "../http/server.js";
export { Metrics } from "./metrics.js";
export { type AgentRecord, Registry } from "./registry.js";
export { negotiateVersion } from "../wire/versions.js";
export * from "../wire/api.js";
