/**
 * acp-kit/coordination: file-based coordination of parallel agents (the coordination protocol). A session directory
 * holds coordination.json (locked, atomically replaced), messages.jsonl (single-write appends),
 * reports/ and data/; a coordinator runs a plan of agents respecting their dependencies.
 */

export { type AgentPatch, applyAgentPatch } from "./agent-patch.js";
export { type AgentProcessExit, runAgentProcess } from "./agent-process.js";
export {
  type AgentOutcome,
  COORDINATOR_NAME,
  DEFAULT_MAX_PARALLEL,
  describeFailure,
  type PartialReport,
  partialReportOf,
  type RunOptions,
  type RunResult,
  runPlan,
  type Transition,
} from "./coordinator.js";
export {
  CoordinationError,
  type CoordinationErrorKind,
  type ErrorLocation,
  formatLocated,
  formatPublicProblem,
  type LocatedProblem,
  type PublicProblem,
  publicProblem,
} from "./errors.js";
export {
  appendEvent,
  type LogChunk,
  type LoggedEvent,
  type LogPosition,
  type LogProblem,
  MAX_EVENT_BYTES,
  readEventLog,
  readEventsFrom,
} from "./event-log.js";
export type { FollowOptions } from "./follow.js";
export {
  formatAgent,
  formatAgentTable,
  formatAggregate,
  formatArtifacts,
  formatEvent,
  formatFinding,
  formatReport,
  formatWaited,
} from "./format.js";
export { writeFileAtomic } from "./fs-atomic.js";
export {
  DEFAULT_LOCK_STALE_MS,
  DEFAULT_LOCK_TIMEOUT_MS,
  FileLock,
  inspectLock,
  type LockOptions,
  type LockState,
  staleReason,
  withFileLock,
} from "./lock.js";
export {
  artifactName,
  artifactRef,
  CONTEXT_ROOT_ENV,
  DEFAULT_CONTEXT_ROOT,
  newSessionId,
  reportRef,
  resolveContextRoot,
  resolveSessionId,
  SESSION_ID_ENVS,
  type SessionPaths,
  sessionPaths,
} from "./paths.js";
export {
  findCycle,
  loadPlan,
  type Plan,
  type PlanInput,
  type PlannedAgent,
  PlanSchema,
  parsePlan,
} from "./plan.js";
export { ProgressDisplay, type ProgressOutput, runPlanWithProgress } from "./progress.js";
export {
  type AgentFinding,
  aggregateReports,
  type CountKey,
  countEvents,
  type EventFilter,
  eventText,
  matchesFilter,
  type NamedReport,
  type ReportAggregate,
  reportFindings,
  timeline,
  timelineLine,
} from "./queries.js";
export {
  AGENT_STATUSES,
  type AgentEntry,
  AgentEntrySchema,
  AgentNameSchema,
  type AgentStatus,
  AgentStatusSchema,
  CompletedEventSchema,
  type Coordination,
  CoordinationSchema,
  DataEventSchema,
  ErrorEventSchema,
  EVENT_TYPES,
  type EventType,
  EventTypeSchema,
  type Finding,
  FindingEventSchema,
  FindingSchema,
  type LockOwner,
  LockOwnerSchema,
  NAME_PATTERN,
  type Report,
  REPORT_STATUSES,
  type ReportInput,
  ReportInputSchema,
  ReportSchema,
  SESSION_ID_PATTERN,
  type SessionEvent,
  type SessionEventInput,
  SessionEventSchema,
  SessionIdSchema,
  SEVERITIES,
  type Severity,
  SeveritySchema,
  StatusEventSchema,
  TimestampSchema,
} from "./schemas.js";
export {
  type ArtifactInfo,
  type CreateSessionOptions,
  Session,
  type SessionOptions,
} from "./session.js";
export { formatPath, lineOfPath, parseJsonFile, parseJsonText, validateWith } from "./validate.js";
export type { WaitedAgent, WaitOptions, WaitResult, WaitSelector } from "./wait.js";
export type { SessionChange, SessionWatcher, WatchOptions } from "./watch.js";
