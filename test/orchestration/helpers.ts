import type {
  CommandAuditEntry,
  CommandAuditSink,
  CommandHandler,
  OrchestrationConfigInput,
  OrchestratorOptions,
} from "../../src/orchestration/index.js";
import { Orchestrator } from "../../src/orchestration/index.js";

/** An audit sink that keeps entries in memory, for tests about what was recorded. */
export class MemorySink implements CommandAuditSink {
  readonly entries: CommandAuditEntry[] = [];
  async record(entry: CommandAuditEntry): Promise<void> {
    this.entries.push(entry);
  }
  commands(): CommandAuditEntry[] {
    return this.entries.filter((e) => e.type === "command");
  }
  responses(): CommandAuditEntry[] {
    return this.entries.filter((e) => e.type === "response");
  }
}

/** Approval off unless a test turns it on, so commands of any priority go straight through. */
export const NO_APPROVAL: OrchestrationConfigInput = { security: { approval_threshold: "none" } };

export function orchestrator(
  config: OrchestrationConfigInput = {},
  extra: Partial<OrchestratorOptions> = {},
): { orch: Orchestrator; audit: MemorySink } {
  const audit = new MemorySink();
  const merged: OrchestrationConfigInput = {
    ...config,
    security: { ...NO_APPROVAL.security, ...config.security },
  };
  const orch = new Orchestrator({ id: "orchestrator", config: merged, audit, ...extra });
  return { orch, audit };
}

/** A handler that records each command it was given. */
export function recording(
  answer: CommandHandler = () => ({ data: "ok" }),
): CommandHandler & { calls: { id: string; to: string; at: number; parameters: Record<string, unknown> }[] } {
  const calls: { id: string; to: string; at: number; parameters: Record<string, unknown> }[] = [];
  const handler: CommandHandler = (command, context) => {
    calls.push({ id: command.id, to: command.to, at: Date.now(), parameters: command.parameters });
    return answer(command, context);
  };
  return Object.assign(handler, { calls });
}

/** Resolves after `ms` of real time (for handlers that must be slow without fake timers). */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
}
