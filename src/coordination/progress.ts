/**
 * The coordinator's live view: one status line per agent. On a terminal the block is redrawn in
 * place (and ticks once a second); elsewhere (logs, CI, pipes) each transition prints one line.
 */
import { type RunOptions, type RunResult, runPlan, type Transition } from "./coordinator.js";
import type { Plan } from "./plan.js";
import type { AgentStatus } from "./schemas.js";
import type { Session } from "./session.js";

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

interface Row {
  status: AgentStatus;
  attempt: number;
  maxAttempts: number;
  detail?: string;
  progress?: string;
  since: number;
}

const SYMBOLS: Record<AgentStatus, string> = { waiting: "·", in_progress: "▶", completed: "✔", failed: "✖" };

/**
 * The live progress of a run: on a terminal, one status line per agent redrawn in place; elsewhere, one line
 * per transition. Feed it the coordinator's transitions (`runPlanWithProgress` does).
 */
export class ProgressDisplay {
  private readonly rows = new Map<string, Row>();
  private readonly width: number;
  private drawn = 0;
  private ticker: NodeJS.Timeout | undefined;

  constructor(
    private readonly out: ProgressOutput,
    agents: readonly string[],
    private readonly tty = out.isTTY === true,
  ) {
    this.width = Math.max(...agents.map((a) => a.length), 5);
    for (const agent of agents)
      this.rows.set(agent, { status: "waiting", attempt: 0, maxAttempts: 1, since: Date.now() });
  }

  /**
   * Draws the status lines and redraws them every second (on a terminal; elsewhere nothing until a
   * transition).
   */
  start(): void {
    if (!this.tty) return;
    this.redraw();
    this.ticker = setInterval(() => this.redraw(), 1000);
    this.ticker.unref();
  }

  /** Shows an agent's new status: its line is updated on a terminal, else a line is printed. */
  transition(t: Transition): void {
    const previous = this.rows.get(t.agent);
    const row: Row = {
      status: t.status,
      attempt: t.attempt,
      maxAttempts: t.maxAttempts,
      since: previous?.status === t.status ? previous.since : Date.now(),
      ...(t.detail !== undefined && { detail: t.detail }),
    };
    this.rows.set(t.agent, row);
    if (this.tty) this.redraw();
    else
      this.out.write(
        `[+${(t.elapsedMs / 1000).toFixed(1)}s] ${t.agent}: ${t.status}${t.detail ? ` (${t.detail})` : ""}\n`,
      );
  }

  /** The agent's own progress text (from coordination.json), shown on a terminal only. */
  progress(agent: string, text: string | undefined): void {
    const row = this.rows.get(agent);
    if (row === undefined || row.progress === text) return;
    if (text === undefined) delete row.progress;
    else row.progress = text;
    if (this.tty) this.redraw();
  }

  /** Stops redrawing and leaves the final status lines on the screen. */
  stop(): void {
    clearInterval(this.ticker);
    if (this.tty) this.redraw();
  }

  private redraw(): void {
    const columns = this.out.columns ?? 100;
    let text = this.drawn > 0 ? `\x1b[${this.drawn}F` : "";
    for (const [agent, row] of this.rows) {
      const seconds = ((Date.now() - row.since) / 1000).toFixed(0).padStart(4);
      const attempt = row.maxAttempts > 1 && row.attempt > 0 ? ` ${row.attempt}/${row.maxAttempts}` : "";
      const note = row.status === "in_progress" ? (row.progress ?? row.detail ?? "") : (row.detail ?? "");
      const line = `${SYMBOLS[row.status]} ${agent.padEnd(this.width)}  ${(row.status + attempt).padEnd(15)} ${seconds}s  ${note}`;
      text += `\x1b[2K${line.slice(0, columns - 1)}\n`;
    }
    this.drawn = this.rows.size;
    this.out.write(text);
  }
}

/**
 * runPlan with the live display attached: transitions come from the coordinator, and each running
 * agent's own progress text (what it writes to coordination.json) is shown beside its status.
 */
export async function runPlanWithProgress(
  plan: Plan,
  session: Session,
  output: ProgressOutput,
  options: RunOptions = {},
): Promise<RunResult> {
  const display = new ProgressDisplay(
    output,
    plan.agents.map((a) => a.name),
  );
  const watcher = session.watch((changes) => {
    if (!changes.includes("coordination")) return;
    void session.readCoordination().then(
      (c) => {
        for (const [name, entry] of Object.entries(c.agents)) display.progress(name, entry.progress);
      },
      () => undefined, // a moment of a hand-broken file must not stop the run; the next change redraws
    );
  });
  display.start();
  try {
    return await runPlan(plan, session, {
      ...options,
      onTransition: (t) => {
        options.onTransition?.(t);
        display.transition(t);
      },
    });
  } finally {
    display.stop();
    watcher.close();
  }
}
