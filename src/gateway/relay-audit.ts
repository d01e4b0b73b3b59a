import { type AuditEntryInput, AuditLog, auditEntryFor, signedInCustody } from "../audit/index.js";
import type { AcpMessage } from "../protocol/index.js";
import type { AgentRecord } from "./registry.js";

/**
 * The relay audit entry of a message the gateway accepted: built once, logged and shown live. A
 * custodial sender's messages can only have been signed by the gateway, and the entry says so.
 */
export function relayedEntryFor(
  message: AcpMessage,
  sender: Pick<AgentRecord, "principalId" | "custodial">,
  toPrincipal: string,
  channel: string,
): AuditEntryInput {
  const entry = auditEntryFor(message, {
    direction: "sent",
    channel,
    self: { principal: sender.principalId },
    peer: { principal: toPrincipal },
  });
  return sender.custodial ? signedInCustody(entry) : entry;
}

/**
 * The gateway's own audit trail of what it relayed: one hash-chained log per sending agent under
 * `<data>/relay-audit/` (agents keep their own logs under their audit root; two writers must never
 * share one log). Appends are queued by AuditLog and never delay the submit answer; a failure to
 * audit is logged and counted, it does not un-accept a persisted message.
 */
export class RelayAudit {
  private readonly logs = new Map<string, Promise<AuditLog>>();

  /** `onAppended` tells a sender's log works (again): the gateway's health shows failing logs. */
  constructor(
    private readonly root: string,
    private readonly onError: (err: unknown, sender: string) => void,
    private readonly onAppended: (sender: string) => void = () => undefined,
  ) {}

  record(entry: AuditEntryInput): void {
    const sender = entry.from.agent;
    this.log(sender)
      .then((log) => log.append(entry))
      .then(
        () => this.onAppended(sender),
        (err: unknown) => this.onError(err, sender),
      );
  }

  async close(): Promise<void> {
    const logs = await Promise.allSettled(this.logs.values());
    this.logs.clear();
    await Promise.all(logs.map((l) => (l.status === "fulfilled" ? l.value.close() : undefined)));
  }

  private log(agent: string): Promise<AuditLog> {
    let log = this.logs.get(agent);
    if (!log) {
      log = AuditLog.open({ root: this.root, agent });
      this.logs.set(agent, log);
      log.catch(() => this.logs.delete(agent));
    }
    return log;
  }
}
