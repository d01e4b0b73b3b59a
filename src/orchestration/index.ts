/** acp-kit/orchestration: the ACP v2.0 command layer: AgentCommand/AgentResponse, five patterns, resilience, approvals. */
export {
  type ApprovalDecision,
  type ApprovalFilter,
  ApprovalRecord,
  ApprovalStatus,
  type ApprovalStore,
  type NewApproval,
} from "./approvals.js";
export {
  APPROVALS_PATH,
  HttpApprovalStore,
  PRINCIPAL_APPROVALS_PATH,
  PrincipalApprovalClient,
} from "./approvals-http.js";
export { APPROVALS_BUCKET, KvApprovalStore } from "./approvals-kv.js";
export { SqliteApprovalStore } from "./approvals-sqlite.js";
export { AuditLogCommandSink, type CommandAuditEntry, type CommandAuditSink } from "./audit.js";
export { type BreakerOptions, type BreakerState, CircuitBreaker } from "./breaker.js";
export { type CachedResponse, ResponseCache } from "./cache.js";
export {
  AcpConfigSchema,
  type ConfigFileInput,
  defaultConfig,
  loadConfig,
  type OrchestrationConfig,
  type OrchestrationConfigInput,
  parseConfig,
  resolveConfig,
  timeoutFor,
} from "./config.js";
export { CommandError, ConfigError, type FailureReason, parseCommand, TimeoutAbort } from "./errors.js";
export {
  type AggregatorName,
  aggregators,
  BroadcastJob,
  loadBroadcastJob,
  loadPipelineJob,
  loadScatterJob,
  PipelineJob,
  ScatterJob,
} from "./jobs.js";
export { type AgentMetricsSnapshot, OrchestrationMetrics, serveMetrics } from "./metrics.js";
export {
  type AsyncReceipt,
  Orchestrator,
  type OrchestratorOptions,
  type SendOptions,
} from "./orchestrator.js";
export type {
  BroadcastResult,
  Outcome,
  PatternOptions,
  PatternStatus,
  PipelineOptions,
  PipelineResult,
  PipelineStep,
  PipelineTemplate,
  ScatterGatherOptions,
  ScatterGatherResult,
} from "./patterns.js";
export { type CommandResult, failureReason } from "./responses.js";
export { type BackoffPolicy, backoffDelay } from "./retry.js";
export {
  ACTIONS,
  Action,
  AgentCommand,
  AgentResponse,
  Artifact,
  COMMAND_CANCEL_METHOD,
  COMMAND_METHOD,
  COMMAND_VERSION,
  type CommandDraft,
  ERROR_CATEGORIES,
  ErrorCategory,
  isSuccessful,
  PRIORITIES,
  Priority,
  RetryPolicy,
  STATUSES,
  Status,
} from "./schemas.js";
export { type ServeCommandsOptions, serveCommands } from "./serve.js";
export {
  type AgentSpec,
  type CommandClient,
  type CommandHandler,
  type HandlerContext,
  type InternalErrorLog,
  logInternalError,
} from "./targets.js";
