import { CoordinationError } from "./errors.js";
import type { AgentStatus, Coordination } from "./schemas.js";
import type { Session } from "./session.js";
import type { WatchOptions } from "./watch.js";

/** Named agents, plus every agent whose name ends with `suffix` (the coordination protocol's `endswith("analyzer")`). */
export interface WaitSelector {
  agents?: string[];
  suffix?: string;
}

export interface WaitedAgent {
  name: string;
  /** `unknown` while the agent has not been registered in coordination.json yet. */
  status: AgentStatus | "unknown";
  progress?: string;
  error?: string;
}

export interface WaitResult {
  outcome: "completed" | "failed" | "timeout" | "aborted";
  agents: WaitedAgent[];
}

export interface WaitOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called with the agents' states whenever one of them changes. */
  onProgress?: (agents: WaitedAgent[]) => void;
  watch?: WatchOptions;
}

/**
 * Blocks until every selected agent has completed, or returns as soon as one has failed (its
 * dependents would wait forever otherwise). A suffix that matches no agent yet keeps waiting.
 */
export async function waitForAgents(
  session: Session,
  selector: WaitSelector,
  options: WaitOptions = {},
): Promise<WaitResult> {
  if ((selector.agents?.length ?? 0) === 0 && selector.suffix === undefined) {
    throw new CoordinationError("invalid", "name at least one agent, or give a suffix", { field: "agents" });
  }
  let lastSnapshot = "";
  const evaluate = async (): Promise<WaitResult | undefined> => {
    const agents = selectAgents(await session.readCoordination(), selector);
    const snapshot = JSON.stringify(agents);
    if (snapshot !== lastSnapshot) {
      lastSnapshot = snapshot;
      options.onProgress?.(agents);
    }
    if (agents.some((a) => a.status === "failed")) return { outcome: "failed", agents };
    if (agents.length > 0 && agents.every((a) => a.status === "completed"))
      return { outcome: "completed", agents };
    return undefined;
  };

  let wake: () => void = () => undefined;
  const watcher = session.watch((changes) => {
    if (changes.includes("coordination")) wake();
  }, options.watch);
  const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
  const onAbort = (): void => wake();
  options.signal?.addEventListener("abort", onAbort);
  try {
    await watcher.ready;
    for (;;) {
      const changed = new Promise<void>((resolve) => {
        wake = resolve;
      });
      const done = await evaluate();
      if (done) return done;
      if (options.signal?.aborted) return { outcome: "aborted", agents: JSON.parse(lastSnapshot) };
      const remaining = deadline === undefined ? undefined : deadline - Date.now();
      if (remaining !== undefined && remaining <= 0)
        return { outcome: "timeout", agents: JSON.parse(lastSnapshot) };
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        changed,
        ...(remaining === undefined ? [] : [new Promise<void>((r) => (timer = setTimeout(r, remaining)))]),
      ]);
      clearTimeout(timer);
    }
  } finally {
    watcher.close();
    options.signal?.removeEventListener("abort", onAbort);
  }
}

export function selectAgents(coordination: Coordination, selector: WaitSelector): WaitedAgent[] {
  const { suffix } = selector;
  const bySuffix =
    suffix === undefined ? [] : Object.keys(coordination.agents).filter((n) => n.endsWith(suffix));
  const names = [...new Set([...(selector.agents ?? []), ...bySuffix])];
  return names.map((name) => {
    const entry = coordination.agents[name];
    return {
      name,
      status: entry?.status ?? "unknown",
      ...(entry?.progress !== undefined && { progress: entry.progress }),
      ...(entry?.error !== undefined && { error: entry.error }),
    };
  });
}
