/**
 * acp-kit/coordination: file-based coordination of parallel agents (the coordination protocol). A session directory
 * holds coordination.json (locked, atomically replaced), messages.jsonl (single-write appends),
 * reports/ and data/; a coordinator runs a plan of agents respecting their dependencies.
 */

export type { AgentPatch } from "./agent-patch.js";
export {
  type AgentOutcome,
  COORDINATOR_NAME,
  DEFAULT_MAX_PARALLEL,
  type PartialReport,
  type RunOptions,
  type RunResult,
  runPlan,
  type Transition,
} from "./coordinator.js";
export { CoordinationError, type CoordinationErrorKind } from "./errors.js";
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
export { writeFileAtomic } from "./fs-atomic.js";
export { FileLock, type LockOptions, withFileLock } from "./lock.js";
export type { SessionPaths } from "./paths.js";
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
  type AgentStatus,
  type Coordination,
  CoordinationSchema,
  EVENT_TYPES,
  type EventType,
  type Finding,
  FindingSchema,
  type LockOwner,
  REPORT_STATUSES,
  type Report,
  type ReportInput,
  ReportInputSchema,
  ReportSchema,
  SEVERITIES,
  type SessionEvent,
  type SessionEventInput,
  SessionEventSchema,
  type Severity,
} from "./schemas.js";
export {
  type ArtifactInfo,
  type CreateSessionOptions,
  Session,
  type SessionOptions,
} from "./session.js";
export type { WaitedAgent, WaitOptions, WaitResult, WaitSelector } from "./wait.js";
export type { SessionChange, SessionWatcher, WatchOptions } from "./watch.js";
