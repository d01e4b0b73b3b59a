/**
 * The file formats of a coordination session (the coordination protocol), as zod schemas. Every schema is `loose`:
 * fields it does not know are kept, so a tool that adds its own fields never loses them when we
 * rewrite a file. Known fields are checked strictly.
 */
import { z } from "zod";
import {
  AGENT_STATUSES,
  type AgentStatus,
  EVENT_TYPES,
  type EventType,
  NAME_PATTERN,
  REPORT_STATUSES,
  SESSION_ID_PATTERN,
  SEVERITIES,
  type Severity,
} from "./vocabulary.js";

export {
  AGENT_STATUSES,
  type AgentStatus,
  EVENT_TYPES,
  type EventType,
  NAME_PATTERN,
  REPORT_STATUSES,
  SESSION_ID_PATTERN,
  SEVERITIES,
  type Severity,
};

export const SessionIdSchema = z
  .string()
  .regex(
    SESSION_ID_PATTERN,
    "must be 1-255 characters with no '/', '\\', '..' or control characters (e.g. a lower-case UUID, or abc123)",
  );
export const AgentNameSchema = z
  .string()
  .regex(NAME_PATTERN, "must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit");
/** ISO 8601 with a zone (`2025-01-23T10:00:00Z`); we write UTC with milliseconds. */
export const TimestampSchema = z.iso.datetime({ offset: true, error: "must be an ISO 8601 timestamp" });

export const AgentStatusSchema = z.enum(AGENT_STATUSES);
export const SeveritySchema = z.enum(SEVERITIES);

export const AgentEntrySchema = z
  .object({
    status: AgentStatusSchema,
    started_at: TimestampSchema.optional(),
    completed_at: TimestampSchema.optional(),
    failed_at: TimestampSchema.optional(),
    report_path: z.string().optional(),
    dependencies: z.array(AgentNameSchema).default([]),
    progress: z.string().optional(),
    reason: z.string().optional(),
    error: z.string().optional(),
    // Filled by the coordinator (`acp session run`) when an agent process ends badly.
    exit_code: z.number().int().nullable().optional(),
    signal: z.string().optional(),
    stderr_tail: z.string().optional(),
    attempts: z.number().int().min(0).optional(),
  })
  .loose();
export type AgentEntry = z.infer<typeof AgentEntrySchema>;

export const CoordinationSchema = z
  .object({
    session_id: SessionIdSchema,
    started_at: TimestampSchema,
    project_type: z.string().optional(),
    project_path: z.string().optional(),
    agents: z.record(AgentNameSchema, AgentEntrySchema).default({}),
  })
  .loose();
export type Coordination = z.infer<typeof CoordinationSchema>;

const JsonObjectSchema = z.record(z.string(), z.unknown());
const eventBase = {
  timestamp: TimestampSchema,
  from: AgentNameSchema,
  data: JsonObjectSchema.optional(),
};

export const StatusEventSchema = z
  .object({ ...eventBase, type: z.literal("status"), message: z.string().min(1) })
  .loose();
export const FindingEventSchema = z
  .object({
    ...eventBase,
    type: z.literal("finding"),
    severity: SeveritySchema,
    message: z.string().optional(),
  })
  .loose()
  .refine((event) => event.message !== undefined || typeof event.data?.["title"] === "string", {
    message: "a finding needs a message or data.title",
    path: ["message"],
  });
export const ErrorEventSchema = z
  .object({
    ...eventBase,
    type: z.literal("error"),
    message: z.string().min(1),
    error: z.string().optional(),
  })
  .loose();
export const DataEventSchema = z
  .object({
    ...eventBase,
    type: z.literal("data"),
    artifact: z.string().min(1),
    description: z.string().optional(),
    message: z.string().optional(),
  })
  .loose();
export const CompletedEventSchema = z
  .object({ ...eventBase, type: z.literal("completed"), message: z.string().min(1) })
  .loose();

export const EventTypeSchema = z.enum(EVENT_TYPES);

/** One line of messages.jsonl. */
export const SessionEventSchema = z.discriminatedUnion("type", [
  StatusEventSchema,
  FindingEventSchema,
  ErrorEventSchema,
  DataEventSchema,
  CompletedEventSchema,
]);
export type SessionEvent = z.infer<typeof SessionEventSchema>;
/** What a writer supplies: the timestamp is filled in when absent. */
export type SessionEventInput = SessionEvent extends infer E
  ? E extends SessionEvent
    ? Omit<E, "timestamp"> & { timestamp?: string }
    : never
  : never;

export const FindingSchema = z
  .object({
    type: z.enum(["issue", "recommendation", "info"]),
    severity: SeveritySchema,
    title: z.string().min(1),
    description: z.string().optional(),
    location: z.string().optional(),
    recommendation: z.string().optional(),
    example: z.string().optional(),
  })
  .loose();
export type Finding = z.infer<typeof FindingSchema>;

/** The standard report, `reports/{agent}.json`. */
export const ReportSchema = z
  .object({
    agent_name: AgentNameSchema,
    timestamp: TimestampSchema,
    status: z.enum(REPORT_STATUSES),
    summary: z.string(),
    findings: z.array(FindingSchema).default([]),
    metrics: z.record(z.string(), z.union([z.number(), z.string(), z.boolean(), z.null()])).default({}),
    data_artifacts: z.array(z.string()).default([]),
    next_actions: z.array(z.string()).default([]),
    recommendations_for_automation: z.array(z.string()).default([]),
  })
  .loose();
export type Report = z.infer<typeof ReportSchema>;
/** A report as a writer supplies it: name, timestamp and status are filled in when absent. */
export const ReportInputSchema = ReportSchema.extend({
  agent_name: AgentNameSchema.optional(),
  timestamp: TimestampSchema.optional(),
  status: z.enum(REPORT_STATUSES).optional(),
});
export type ReportInput = z.input<typeof ReportInputSchema>;

/** The owner record inside a lock file. */
export const LockOwnerSchema = z.object({
  pid: z.number().int(),
  host: z.string(),
  time: TimestampSchema,
  token: z.string(),
});
export type LockOwner = z.infer<typeof LockOwnerSchema>;
