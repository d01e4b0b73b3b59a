import { AuditLog } from "../../audit/index.js";

export interface CollabAuditEvent {
  /** e.g. `collab.escrow.hold`, `agent.vote.ballot`. */
  method: string;
  /** The acting agent and principal. */
  from: { agent: string; principal: string | null };
  /** The other side (the acting agent again for a record addressed to itself). */
  to: { agent: string; principal: string | null };
  /** The object it concerns (handoff, session, vote… id). */
  id: string;
  /** The signed message behind it, when there is one. */
  messageId?: string;
  summary: string;
}

/**
 * The collaboration module's own audit trail: every state change and every ledger movement, one
 * hash-chained JSONL log (`<root>/collab/YYYY-MM.jsonl`, the format `acp audit verify` checks).
 * Messages relayed to another agent are also in the gateway's relay audit; records that are not
 * relayed (ballots, knowledge entries, ledger movements) are only here. Appends never delay an answer;
 * a failed append is reported to `onError`.
 */
export class CollabAudit {
  private log: Promise<AuditLog> | undefined;

  constructor(
    private readonly root: string | undefined,
    private readonly onError: (err: unknown) => void,
  ) {}

  record(event: CollabAuditEvent): void {
    if (this.root === undefined) return;
    this.log ??= AuditLog.open({ root: this.root, agent: "collab" });
    this.log
      .then((log) =>
        log.append({
          direction: "sent",
          from: event.from,
          to: event.to,
          type: "notification",
          method: event.method,
          id: event.id,
          ...(event.messageId ? { messageId: event.messageId } : {}),
          summary: event.summary,
          channel: "collab",
        }),
      )
      .catch(this.onError);
  }

  /** Lets queued appends finish and releases the log. */
  async close(): Promise<void> {
    const log = await this.log?.catch(() => undefined);
    this.log = undefined;
    await log?.close();
  }
}
