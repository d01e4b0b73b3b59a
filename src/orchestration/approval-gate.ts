import type { ApprovalRecord, ApprovalStore } from "./approvals.js";
import { needsApprovalByPriority, type OrchestrationConfig } from "./config.js";
import type { FailureReason } from "./errors.js";
import { baseOf, cancelledResponse, failureResponse } from "./responses.js";
import type { AgentCommand, AgentResponse } from "./schemas.js";

export interface ApprovalOptions {
  signal?: AbortSignal | undefined;
  onApproval?: ((approval: ApprovalRecord) => void) | undefined;
}

/**
 * The human-approval step of the orchestrator: decides whether a command needs approval, asks for
 * it in the store, waits, and turns a denial, an expiry or a withdrawal into the response to give.
 */
export class ApprovalGate {
  constructor(
    private readonly settings: {
      id: string;
      principal: string | undefined;
      config: OrchestrationConfig;
      store: ApprovalStore | undefined;
    },
  ) {}

  /** The approvals this orchestrator asked for that are still pending (after a restart). */
  async pending(): Promise<ApprovalRecord[]> {
    return this.settings.store
      ? this.settings.store.list({ status: "pending", requestedBy: this.settings.id })
      : [];
  }

  /** Asks for approval when the command needs it and waits; gives the refusal, or undefined to go ahead. */
  async check(
    command: AgentCommand,
    fallbacks: readonly string[],
    options: ApprovalOptions,
    started: number,
  ): Promise<AgentResponse | undefined> {
    const why = command.security?.requireApproval
      ? "the command sets security.requireApproval"
      : needsApprovalByPriority(this.settings.config, command.priority)
        ? `priority ${command.priority} is at or above approval_threshold ${this.settings.config.security.approval_threshold}`
        : undefined;
    if (why === undefined) return undefined;
    const store = this.settings.store;
    const unavailable = (message: string) =>
      failureResponse(baseOf(this.settings.id, command, started), {
        category: "permission_error",
        recoverable: false,
        reason: "approval_unavailable",
        message,
      });
    if (!store)
      return unavailable(`${why}, but this orchestrator has no approval store; the command was not sent`);
    let approval: ApprovalRecord;
    try {
      approval = await store.create({
        command,
        fallbacks: [...fallbacks],
        reason: why,
        requestedBy: this.settings.id,
        principal: this.settings.principal ?? null,
        timeoutMs: this.settings.config.security.approval_timeout,
      });
    } catch (err) {
      return unavailable(`${why}, but the approval could not be requested (${(err as Error).message})`);
    }
    options.onApproval?.(approval);
    return this.awaitDecision(approval, command, started, options);
  }

  async awaitDecision(
    approval: ApprovalRecord,
    command: AgentCommand,
    started: number,
    options: ApprovalOptions,
  ): Promise<AgentResponse | undefined> {
    const store = this.settings.store!;
    let decided: ApprovalRecord;
    try {
      decided = await store.waitForDecision(approval.id, options.signal);
    } catch (err) {
      if (options.signal?.aborted) {
        await store
          .decide(approval.id, { decision: "cancelled", by: this.settings.id })
          .catch(() => undefined);
        return cancelledResponse(
          baseOf(this.settings.id, command, started),
          `while waiting for approval ${approval.id}`,
        );
      }
      const message = `approval ${approval.id} could not be read (${(err as Error).message})`;
      return failureResponse(baseOf(this.settings.id, command, started), {
        category: "system_error",
        recoverable: false,
        reason: "approval_unavailable",
        message,
      });
    }
    const base = baseOf(this.settings.id, command, started);
    const deny = (reason: FailureReason, message: string) =>
      failureResponse(
        base,
        { category: "permission_error", recoverable: false, reason, message },
        { approvalId: approval.id },
      );
    switch (decided.status) {
      case "approved":
        return undefined;
      case "denied":
        return deny(
          "approval_denied",
          `approval ${approval.id} was denied by ${decided.decidedBy ?? "the principal"}${decided.note ? `: ${decided.note}` : ""}`,
        );
      case "expired":
        return deny(
          "approval_expired",
          `approval ${approval.id} expired: no decision by ${decided.expiresAt}; the command was not sent`,
        );
      default:
        return cancelledResponse(base, `approval ${approval.id} was withdrawn`);
    }
  }
}
