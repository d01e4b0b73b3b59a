import { readdir } from "node:fs/promises";
import { resolve } from "node:path";
import { formatLocated, formatPublicProblem, publicProblem } from "../../coordination/errors.js";
import { type AgentEntry, Session, type SessionEvent } from "../../coordination/index.js";
import { SESSION_ID_PATTERN } from "../../coordination/schemas.js";
import { AcpError } from "../../protocol/index.js";
import type { Scope } from "./viewer.js";

export interface SessionSummary {
  id: string;
  startedAt: string | null;
  projectType?: string;
  agents: number;
  /** Agents per status (waiting, in_progress, completed, failed). */
  byStatus: Record<string, number>;
  /**
   * Set when coordination.json cannot be read: the file relative to the session and a generic
   * reason, never its content or a server path (docs/security.md, "Coordination files").
   */
  error?: string;
}

export interface SessionAgentView extends AgentEntry {
  name: string;
}

export interface SessionDetail extends SessionSummary {
  agents: number;
  agentList: SessionAgentView[];
  /** The most recent events of messages.jsonl, oldest first. */
  events: SessionEvent[];
  eventCount: number;
  /** Lines of messages.jsonl that could not be read. */
  problems: number;
  /** The agents' reports (reports/{agent}.json), by agent name. */
  reports: SessionReportView[];
  /** Reports that could not be read (not shown; `acp session report summaries` names them). */
  unreadableReports: number;
}

export interface SessionReportView {
  agent: string;
  status: string;
  summary: string;
  timestamp: string;
  findings: number;
  /** What had to be repaired to read it, e.g. `timestamp: is the shell's unexpanded $(date …)…`. */
  warnings?: string[];
}

const MAX_EVENTS = 200;

/**
 * Coordination sessions (the coordination protocol) under a context root on the gateway's machine. Sessions
 * name their agents freely; a principal sees a session in which one of its registered agents takes part (by
 * agent id), the admin sees every one.
 */
export class SessionsView {
  constructor(private readonly root: string) {}

  async list(scope: Scope): Promise<SessionSummary[]> {
    const names = await readdir(this.root).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT" || err.code === "ENOTDIR") return [] as string[];
      throw err;
    });
    const summaries = await Promise.all(
      names.filter((name) => SESSION_ID_PATTERN.test(name)).map((id) => this.summary(id)),
    );
    return summaries
      .flatMap((s) => (s && this.visible(scope, s.names) ? [s.summary] : []))
      .sort((a, b) => (b.startedAt ?? "").localeCompare(a.startedAt ?? ""));
  }

  async detail(scope: Scope, id: string): Promise<SessionDetail> {
    const missing = new AcpError("NotFound", `no coordination session ${id}`);
    if (!SESSION_ID_PATTERN.test(id)) throw missing;
    const session = await Session.open({ root: this.root, id }).catch(() => {
      throw missing;
    });
    const unreadable = (err: unknown) => {
      throw new AcpError("StorageUnavailable", `session ${id}: ${this.describe(err, id)}`);
    };
    const coordination = await session.readCoordination().catch(unreadable);
    const agentList = Object.entries(coordination.agents).map(([name, entry]) => ({ ...entry, name }));
    if (
      !this.visible(
        scope,
        agentList.map((a) => a.name),
      )
    )
      throw missing;
    const { events, problems } = await session.readEvents().catch(unreadable);
    let unreadableReports = 0;
    const reports = await session.readReports({ onInvalid: () => unreadableReports++ }).catch(unreadable);
    return {
      ...summarize(id, coordination.started_at, coordination.project_type, agentList),
      agentList,
      events: events.slice(-MAX_EVENTS).map((logged) => logged.event),
      eventCount: events.length,
      problems: problems.length,
      reports: reports.map(({ agent, report, warnings }) => ({
        agent,
        status: report.status,
        summary: report.summary,
        timestamp: report.timestamp,
        findings: report.findings.length,
        ...(warnings && { warnings: warnings.map((w) => formatLocated(w.detail, w)) }),
      })),
      unreadableReports,
    };
  }

  private visible(scope: Scope, agentNames: string[]): boolean {
    return scope.isAdmin || agentNames.some((name) => scope.ownsAgent(name));
  }

  private async summary(id: string): Promise<{ summary: SessionSummary; names: string[] } | undefined> {
    try {
      const session = await Session.open({ root: this.root, id });
      const coordination = await session.readCoordination();
      const agents = Object.entries(coordination.agents).map(([name, entry]) => ({ ...entry, name }));
      return {
        summary: summarize(id, coordination.started_at, coordination.project_type, agents),
        names: agents.map((a) => a.name),
      };
    } catch (err) {
      // Shown to the admin only (no agent names to match a principal against).
      return {
        summary: { id, startedAt: null, agents: 0, byStatus: {}, error: this.describe(err, id) },
        names: [],
      };
    }
  }

  private describe(err: unknown, id: string): string {
    return formatPublicProblem(publicProblem(err, resolve(this.root, id)));
  }
}

function summarize(
  id: string,
  startedAt: string,
  projectType: string | undefined,
  agents: SessionAgentView[],
): SessionSummary {
  const byStatus: Record<string, number> = {};
  for (const agent of agents) byStatus[agent.status] = (byStatus[agent.status] ?? 0) + 1;
  return {
    id,
    startedAt,
    ...(projectType !== undefined ? { projectType } : {}),
    agents: agents.length,
    byStatus,
  };
}
