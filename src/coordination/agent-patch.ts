import { reportRef } from "./paths.js";
import type { AgentEntry, AgentStatus } from "./schemas.js";

/** A change to one agent's entry. Setting a status fills the protocol's timestamps (see applyAgentPatch). */
export interface AgentPatch {
  status?: AgentStatus;
  progress?: string;
  reason?: string;
  error?: string;
  dependencies?: string[];
  report_path?: string;
  exit_code?: number | null;
  signal?: string;
  stderr_tail?: string;
  attempts?: number;
}

/**
 * The coordination protocol's status rules: entering in_progress stamps started_at and clears the
 * previous attempt's outcome; completed stamps completed_at and report_path; failed stamps
 * failed_at. Any status change drops the old `reason` and `progress` (a completed agent is no longer
 * "retrying after…" nor "working 50%"); the patch may set new ones.
 */
export function applyAgentPatch(
  previous: AgentEntry | undefined,
  name: string,
  patch: AgentPatch,
  now: string,
): AgentEntry {
  const entry: AgentEntry = previous ? { ...previous } : { status: "waiting", dependencies: [] };
  const { status, ...fields } = patch;
  if (status !== undefined && (status !== entry.status || previous === undefined)) {
    delete entry.reason;
    delete entry.progress;
    if (status === "in_progress") {
      entry.started_at = now;
      for (const key of [
        "completed_at",
        "failed_at",
        "error",
        "exit_code",
        "signal",
        "stderr_tail",
      ] as const) {
        delete entry[key];
      }
    }
    if (status === "completed") {
      entry.completed_at = now;
      entry.report_path = reportRef(name);
    }
    if (status === "failed") entry.failed_at = now;
    entry.status = status;
  }
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) (entry as Record<string, unknown>)[key] = value;
  }
  return entry;
}
