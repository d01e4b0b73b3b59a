/** Human-readable renderings of session data, for the CLI (machine output is the JSON itself). */
import type { LoggedEvent } from "./event-log.js";
import type { AgentFinding, ReportAggregate } from "./queries.js";
import { eventText } from "./queries.js";
import type { AgentEntry, Report } from "./schemas.js";
import type { ArtifactInfo } from "./session.js";
import type { WaitedAgent } from "./wait.js";

/** A table of agents: name, status, what it is doing or waiting for, and its dependencies. */
export function formatAgentTable(agents: Record<string, AgentEntry>): string {
  const names = Object.keys(agents);
  if (names.length === 0) return "(no agents)";
  const width = Math.max(...names.map((n) => n.length), "AGENT".length);
  const lines = [`${"AGENT".padEnd(width)}  ${"STATUS".padEnd(11)}  DETAIL`];
  for (const [name, entry] of Object.entries(agents)) {
    const detail = [
      entry.status === "failed" ? entry.error : (entry.progress ?? entry.reason),
      entry.dependencies.length > 0 ? `(depends on ${entry.dependencies.join(", ")})` : undefined,
    ]
      .filter((part) => part !== undefined)
      .join(" ");
    lines.push(`${name.padEnd(width)}  ${entry.status.padEnd(11)}  ${detail}`);
  }
  return lines.join("\n");
}

/** Every field of one agent's entry, one per line. */
export function formatAgent(name: string, entry: AgentEntry): string {
  const lines = [`${name}: ${entry.status}`];
  for (const [key, value] of Object.entries(entry)) {
    if (key === "status" || value === undefined) continue;
    const text = Array.isArray(value) ? value.join(", ") || "(none)" : String(value);
    lines.push(`  ${key}: ${text.includes("\n") ? `\n    ${text.split("\n").join("\n    ")}` : text}`);
  }
  return lines.join("\n");
}

/** `line  time [from] type(severity): text`, plus the artifact of a data event. */
export function formatEvent({ line, event }: LoggedEvent): string {
  const severity = event.type === "finding" ? `(${event.severity})` : "";
  const artifact = event.type === "data" ? ` → ${event.artifact}` : "";
  return `${String(line).padStart(5)}  ${event.timestamp} [${event.from}] ${event.type}${severity}: ${eventText(event)}${artifact}`;
}

export function formatFinding(finding: AgentFinding): string {
  const where = finding.location ? ` (${finding.location})` : "";
  return `[${finding.severity}] ${finding.agent}: ${finding.type}: ${finding.title}${where}`;
}

export function formatReport(report: Report): string {
  const lines = [`${report.agent_name} · ${report.status} · ${report.timestamp}`, "", report.summary, ""];
  lines.push(`Findings (${report.findings.length}):`);
  for (const f of report.findings) {
    lines.push(`  [${f.severity}] ${f.type}: ${f.title}${f.location ? ` (${f.location})` : ""}`);
    if (f.description) lines.push(`      ${f.description}`);
    if (f.recommendation) lines.push(`      → ${f.recommendation}`);
  }
  const metrics = Object.entries(report.metrics).map(([k, v]) => `${k}=${v}`);
  if (metrics.length > 0) lines.push(`Metrics: ${metrics.join(", ")}`);
  const list = (title: string, items: string[]) => {
    if (items.length > 0) lines.push(`${title}:`, ...items.map((i) => `  - ${i}`));
  };
  list("Data artifacts", report.data_artifacts);
  list("Next actions", report.next_actions);
  list("Recommendations for automation", report.recommendations_for_automation);
  return lines.join("\n");
}

export function formatAggregate(a: ReportAggregate): string {
  const lines = [
    `reports:                  ${a.reports}`,
    `total findings:           ${a.total_findings} (high ${a.high_severity}, medium ${a.medium_severity}, low ${a.low_severity})`,
    `automation opportunities: ${a.automation_opportunities}`,
  ];
  const metrics = Object.entries(a.metrics).map(([k, v]) => `${k}=${v}`);
  if (metrics.length > 0) lines.push(`metrics (summed):         ${metrics.join(", ")}`);
  if (a.data_artifacts.length > 0) lines.push("data artifacts:", ...a.data_artifacts.map((d) => `  - ${d}`));
  if (a.automation_suggestions.length > 0) {
    lines.push("automation suggestions:", ...a.automation_suggestions.map((s) => `  - ${s}`));
  }
  if (a.next_actions.length > 0)
    lines.push("next actions:", ...a.next_actions.map((n) => `  - [${n.agent}] ${n.action}`));
  return lines.join("\n");
}

export function formatArtifacts(artifacts: readonly ArtifactInfo[]): string {
  if (artifacts.length === 0) return "(no artifacts)";
  return artifacts
    .map(
      (a) =>
        `${a.ref}  ${a.bytes} B  ${a.modified_at}${a.created_by.length > 0 ? `  by ${a.created_by.join(", ")}` : ""}`,
    )
    .join("\n");
}

/** `a: completed, b: in_progress (50%), c: not registered yet`. */
export function formatWaited(agents: readonly WaitedAgent[]): string {
  if (agents.length === 0) return "no matching agent registered yet";
  return agents
    .map((a) =>
      a.status === "unknown"
        ? `${a.name}: not registered yet`
        : `${a.name}: ${a.status}${a.progress && a.status === "in_progress" ? ` (${a.progress})` : ""}`,
    )
    .join(", ");
}
