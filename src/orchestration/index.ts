/** acp-kit/orchestration: the ACP v2.0 command layer: AgentCommand/AgentResponse, five patterns, resilience, approvals. */
export {
  type ApprovalDecision,
  type ApprovalFilter,
  ApprovalRecord,
  ApprovalStatus,
  type ApprovalStore,
  type NewApproval,
} from "./approvals.js";
export { HttpApprovalStore, PrincipalApprovalClient } from "./approvals-http.js";
export { KvApprovalStore } from "./approvals-kv.js";
export { SqliteApprovalStore } from "./approvals-sqlite.js";
export { AuditLogCommandSink, type CommandAuditEntry, type CommandAuditSink } from "./audit.js";
export type { BreakerState } from "./breaker.js";
export { type CachedResponse, ResponseCache } from "./cache.js";
export {
  type ConfigFileInput,
  defaultConfig,
  loadConfig,
  type OrchestrationConfig,
  type OrchestrationConfigInput,
  parseConfig,
  resolveConfig,
} from "./config.js";
export { CommandError, ConfigError, type FailureReason, parseCommand } from "./errors.js";
export { type AggregatorName, aggregators } from "./jobs.js";
export { type AgentMetricsSnapshot, OrchestrationMetrics, serveMetrics } from "./metrics.js";
export {
  type AsyncReceipt,
  type CommandSendOptions,
  Orchestrator,
  type OrchestratorOptions,
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
