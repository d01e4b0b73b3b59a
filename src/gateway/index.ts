export * from "./auth.js";
export type { Caller, GatewayContext } from "./context.js";
export { authenticate, authenticateAgent, requireAdmin } from "./context.js";
export * from "./gateway.js";
export type { HealthReport } from "./health.js";
export { httpStatusOf, Router, readJsonBody, sendError, sendJson } from "./http.js";
export { Metrics } from "./metrics.js";
export { type AgentRecord, negotiateVersion, Registry } from "./registry.js";
export * from "./wire.js";
