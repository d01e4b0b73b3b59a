import { signedInCustody } from "../../audit/entry.js";
import { type AuditEntryInput, AuditLog } from "../../audit/index.js";

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
  /** The summary is the acting agent's own words (the signed message's `summary` header). */
  summaryBy?: "sender";
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
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly root: string | undefined,
    private readonly onError: (err: unknown) => void,
    /** Whether the gateway holds an agent's key and so signed its messages on its behalf. */
    private readonly isCustodial: (agentId: string) => Promise<boolean> = async () => false,
  ) {}

  record(event: CollabAuditEvent): void {
    if (this.root === undefined) return;
    this.log ??= AuditLog.open({ root: this.root, agent: "collab" });
    // Only an event behind a signed message can have been signed in custody. Looked up at once,
    // appended in the order recorded (the queue only orders the appends, it does not await them).
    const custodial = event.messageId ? this.isCustodial(event.from.agent) : Promise.resolve(false);
    custodial.catch(() => undefined); // reported below, once its turn comes
    const opening = this.log;
    this.queue = this.queue.then(() =>
      Promise.all([opening, custodial]).then(([log, signedByGateway]) => {
        const entry: AuditEntryInput = {
          direction: "sent",
          from: event.from,
          to: event.to,
          type: "notification",
          method: event.method,
          id: event.id,
          ...(event.messageId ? { messageId: event.messageId } : {}),
          summary: event.summary,
          ...(event.summaryBy ? { summaryBy: event.summaryBy } : {}),
          channel: "collab",
        };
        log.append(signedByGateway ? signedInCustody(entry) : entry).catch(this.onError);
      }, this.onError),
    );
  }

  /** Lets queued appends finish and releases the log. */
  async close(): Promise<void> {
    await this.queue;
    const log = await this.log?.catch(() => undefined);
    this.log = undefined;
    await log?.close();
  }
}
