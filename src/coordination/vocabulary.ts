/**
 * The coordination protocol's fixed words and name rules, free of zod so that what only needs them
 * (the CLI's option choices, path checks) loads nothing else. schemas.ts builds its validators on them.
 */

/**
 * A session id names a directory under the context root: any text that stays one path segment.
 * The protocol suggests a lower-case UUID but its own example is `abc123`, so both are accepted; no
 * path separator, no `..`, no control character (NUL included), not empty, at most 255 characters.
 */
export const SESSION_ID_PATTERN = /^(?!\.\.?$)(?!.*\.\.)[^/\\\p{Cc}]{1,255}$/u;
/** Agent and artifact names become file names (`reports/{agent}.json`), so no slashes, no leading dot. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export const AGENT_STATUSES = ["waiting", "in_progress", "completed", "failed"] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

export const SEVERITIES = ["high", "medium", "low"] as const;
export type Severity = (typeof SEVERITIES)[number];

export const EVENT_TYPES = ["status", "finding", "error", "data", "completed"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const REPORT_STATUSES = ["completed", "failed", "partial"] as const;
