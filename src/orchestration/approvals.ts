import { randomUUID } from "node:crypto";
import { z } from "zod";
import { AcpError, AgentId } from "../protocol/index.js";
import { AgentCommand } from "./schemas.js";

/**
 * Human approval of commands. A command that needs it is stored as a pending approval; the
 * principal (through `acp approvals`, the gateway API or the dashboard) approves or denies it; the
 * orchestrator waits for the decision. Stores persist records, so a restart of the gateway or of
 * the orchestrator loses no pending approval. Three stores share these rules: broker KV (inside
 * the gateway, embedded or NATS), the gateway's HTTP API (an orchestrator in another process), and
 * a local SQLite file (standalone use).
 */
export const APPROVAL_STATUSES = ["pending", "approved", "denied", "expired", "cancelled"] as const;
export const ApprovalStatus = z.enum(APPROVAL_STATUSES);
export type ApprovalStatus = z.infer<typeof ApprovalStatus>;

export const ApprovalRecord = z.object({
  id: z.string().min(1),
  status: ApprovalStatus,
  command: AgentCommand,
  /** Agents the command may fall back to: the approval covers them too, so the approver sees them. */
  fallbacks: z.array(AgentId),
  /** Why approval is needed, e.g. `security.requireApproval` or `priority critical ≥ threshold high`. */
  reason: z.string(),
  /** The agent (orchestrator) that asked. */
  requestedBy: z.string().min(1),
  /** The principal whose approval is asked for, when known. */
  principal: z.string().nullable(),
  createdAt: z.iso.datetime({ offset: true }),
  expiresAt: z.iso.datetime({ offset: true }),
  decidedAt: z.iso.datetime({ offset: true }).optional(),
  decidedBy: z.string().optional(),
  /** The approver's note (e.g. why it was denied). */
  note: z.string().optional(),
});
export type ApprovalRecord = z.infer<typeof ApprovalRecord>;

export interface NewApproval {
  command: AgentCommand;
  fallbacks: string[];
  reason: string;
  requestedBy: string;
  principal: string | null;
  timeoutMs: number;
}

export interface ApprovalDecision {
  decision: "approved" | "denied" | "cancelled";
  by: string;
  note?: string;
}

export interface ApprovalFilter {
  status?: ApprovalStatus;
  requestedBy?: string;
}

export interface ApprovalStore {
  /** Records a new pending approval for a command that needs a human's yes, expiring after `timeoutMs`. */
  create(input: NewApproval): Promise<ApprovalRecord>;
  /** The record, with a pending one past its expiry turned (and stored) `expired`. */
  get(id: string): Promise<ApprovalRecord | null>;
  /** Oldest first. */
  list(filter?: ApprovalFilter): Promise<ApprovalRecord[]>;
  /** Only a pending, unexpired approval can be decided; anything else is an AcpError Conflict. */
  decide(id: string, decision: ApprovalDecision): Promise<ApprovalRecord>;
  /** Resolves once the approval is no longer pending (decided, cancelled or expired). */
  waitForDecision(id: string, signal?: AbortSignal): Promise<ApprovalRecord>;
  /**
   * Lets go of what the store holds open (a database, a connection); its records stay where they are kept.
   */
  close(): Promise<void>;
}

/** Decided approvals are kept this long for `acp approvals list --all`, then pruned. */
export const DECIDED_RETENTION_MS = 7 * 24 * 3_600_000;

export function newApprovalRecord(input: NewApproval, now = new Date()): ApprovalRecord {
  return {
    id: randomUUID(),
    status: "pending",
    command: input.command,
    fallbacks: input.fallbacks,
    reason: input.reason,
    requestedBy: input.requestedBy,
    principal: input.principal,
    createdAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + input.timeoutMs).toISOString(),
  };
}

export function isOverdue(record: ApprovalRecord, now = new Date()): boolean {
  return record.status === "pending" && now.getTime() >= Date.parse(record.expiresAt);
}

export function expired(record: ApprovalRecord, now = new Date()): ApprovalRecord {
  return { ...record, status: "expired", decidedAt: now.toISOString(), decidedBy: "timeout" };
}

/**
 * The one transition rule: pending → approved | denied | cancelled, and only before the expiry.
 * Returns the record to store, and the error to throw after storing it (an overdue approval is
 * stored as expired, then the late decision is refused).
 */
export function applyDecision(
  record: ApprovalRecord,
  decision: ApprovalDecision,
  now = new Date(),
): { next: ApprovalRecord | undefined; error: AcpError | undefined } {
  if (record.status !== "pending") {
    return {
      next: undefined,
      error: new AcpError("Conflict", `approval ${record.id} is already ${record.status}`, {
        status: record.status,
      }),
    };
  }
  if (isOverdue(record, now)) {
    return {
      next: expired(record, now),
      error: new AcpError("Conflict", `approval ${record.id} expired at ${record.expiresAt}`, {
        status: "expired",
      }),
    };
  }
  return {
    next: {
      ...record,
      status: decision.decision,
      decidedAt: now.toISOString(),
      decidedBy: decision.by,
      ...(decision.note !== undefined && decision.note !== "" ? { note: decision.note } : {}),
    },
    error: undefined,
  };
}

export function matches(record: ApprovalRecord, filter: ApprovalFilter = {}): boolean {
  return (
    (filter.status === undefined || record.status === filter.status) &&
    (filter.requestedBy === undefined || record.requestedBy === filter.requestedBy)
  );
}

export function notFound(id: string): AcpError {
  return new AcpError("NotFound", `no approval ${id}`);
}

/**
 * The waiting loop every store shares: read; if still pending, sleep until a change is signalled,
 * the poll interval passes, or the approval's expiry comes (which the next read turns into
 * `expired`); repeat.
 */
export async function waitUntilDecided(
  id: string,
  read: (id: string) => Promise<ApprovalRecord | null>,
  nextChange: (ms: number, signal?: AbortSignal) => Promise<void>,
  pollMs: number,
  signal?: AbortSignal,
): Promise<ApprovalRecord> {
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    const record = await read(id);
    if (!record) throw notFound(id);
    if (record.status !== "pending") return record;
    const untilExpiry = Math.max(0, Date.parse(record.expiresAt) - Date.now());
    await nextChange(Math.min(pollMs, untilExpiry + 1), signal);
  }
}

/** Wakes waiters when a change is seen; `next` also ends after `ms` or when the signal aborts. */
export class ChangeSignal {
  private waiters = new Set<() => void>();

  notify(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  next(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        reject(signal?.reason);
      };
      const timer = setTimeout(done, ms);
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(done);
    });
  }
}
