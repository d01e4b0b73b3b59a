/** The coordination protocol's jq recipes as plain functions over events and reports. */
import type { LocatedProblem } from "./errors.js";
import type { LoggedEvent } from "./event-log.js";
import type { EventType, Finding, Report, SessionEvent, Severity } from "./schemas.js";

export interface EventFilter {
  from?: string;
  type?: EventType;
  severity?: Severity;
}

/** `jq 'select(.from == …)'`, `select(.type == …)`, `select(.type == "finding" and .severity == …)`. */
export function matchesFilter(event: SessionEvent, filter: EventFilter): boolean {
  if (filter.from !== undefined && event.from !== filter.from) return false;
  if (filter.type !== undefined && event.type !== filter.type) return false;
  if (filter.severity !== undefined && (event as { severity?: unknown }).severity !== filter.severity)
    return false;
  return true;
}

export type CountKey = "type" | "from" | "severity";

/** `jq -s 'group_by(.type) | map({type: .[0].type, count: length})'`, also by sender or severity. */
export function countEvents(
  events: readonly SessionEvent[],
  by: CountKey = "type",
): { key: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const event of events) {
    const value = (event as Record<string, unknown>)[by];
    if (value === undefined) continue;
    const key = String(value);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([key, count]) => ({ key, count }));
}

/** Events in time order; events with the same instant keep their order in the log. */
export function timeline(events: readonly LoggedEvent[]): LoggedEvent[] {
  return events
    .map((logged) => ({ logged, at: Date.parse(logged.event.timestamp) }))
    .sort((a, b) => a.at - b.at || a.logged.line - b.logged.line)
    .map(({ logged }) => logged);
}

/** `.message // .data.title // "no message"` (a data event's description counts as its message). */
export function eventText(event: SessionEvent): string {
  if (event.message !== undefined) return event.message;
  const title = event.data?.["title"];
  if (typeof title === "string") return title;
  if (event.type === "data") return event.description ?? event.artifact;
  return "no message";
}

/** One timeline line, as the protocol prints it: `time [from] type: text`. */
export function timelineLine(event: SessionEvent): string {
  return `${event.timestamp} [${event.from}] ${event.type}: ${eventText(event)}`;
}

export interface NamedReport {
  /** The agent the report file belongs to (`reports/{agent}.json`). */
  agent: string;
  report: Report;
  /** What was repaired to read it (an unexpanded `$(date …)` timestamp), by field; absent when nothing. */
  warnings?: LocatedProblem[];
}

export interface AgentFinding extends Finding {
  agent: string;
}

/** `jq -s 'map(.findings[]) | map(select(.severity == "high"))'`, each finding tagged with its agent. */
export function reportFindings(reports: readonly NamedReport[], severity?: Severity): AgentFinding[] {
  return reports.flatMap(({ agent, report }) =>
    report.findings
      .filter((f) => severity === undefined || f.severity === severity)
      .map((f) => ({ agent, ...f })),
  );
}

export interface ReportAggregate {
  reports: number;
  total_findings: number;
  high_severity: number;
  medium_severity: number;
  low_severity: number;
  automation_opportunities: number;
  automation_suggestions: string[];
  data_artifacts: string[];
  next_actions: { agent: string; action: string }[];
  /** Numeric metrics summed over the reports that have them. */
  metrics: Record<string, number>;
}

/** The protocol's "aggregate metrics" and the coordinator's "synthesize all findings", in one object. */
export function aggregateReports(reports: readonly NamedReport[]): ReportAggregate {
  const findings = reportFindings(reports);
  const bySeverity = (s: Severity) => findings.filter((f) => f.severity === s).length;
  const suggestions = reports.flatMap(({ report }) => report.recommendations_for_automation);
  const metrics: Record<string, number> = {};
  for (const { report } of reports) {
    for (const [key, value] of Object.entries(report.metrics)) {
      if (typeof value === "number") metrics[key] = (metrics[key] ?? 0) + value;
    }
  }
  return {
    reports: reports.length,
    total_findings: findings.length,
    high_severity: bySeverity("high"),
    medium_severity: bySeverity("medium"),
    low_severity: bySeverity("low"),
    automation_opportunities: suggestions.length,
    automation_suggestions: suggestions,
    data_artifacts: [...new Set(reports.flatMap(({ report }) => report.data_artifacts))].sort(),
    next_actions: reports.flatMap(({ agent, report }) =>
      report.next_actions.map((action) => ({ agent, action })),
    ),
    metrics,
  };
}
