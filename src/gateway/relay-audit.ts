import { signedInCustody } from "../audit/entry.js";
import { type AuditEntryInput, AuditLog, auditEntryFor, type SummaryContext } from "../audit/index.js";
import { requestLabel } from "../audit/summary.js";
import type { AcpMessage, EnvelopeHeaders } from "../protocol/index.js";
import type { AgentRecord } from "./registry.js";

/**
 * The relay audit entry of a message the gateway accepted: built once, logged and shown live. A
 * custodial sender's messages can only have been signed by the gateway, and the entry says so.
 * `postedToChat`: this gateway posts the summary to a human chat channel (`discord_summary`).
 */
export function relayedEntryFor(
  message: AcpMessage,
  sender: Pick<AgentRecord, "principalId" | "custodial">,
  toPrincipal: string,
  channel: string,
  summary: { context?: SummaryContext; postedToChat: boolean },
): AuditEntryInput {
  const entry = auditEntryFor(message, {
    direction: "sent",
    channel,
    self: { principal: sender.principalId },
    peer: { principal: toPrincipal },
    ...(summary.context ? { context: summary.context } : {}),
  });
  const recorded = { ...entry, discord_summary: summary.postedToChat };
  return sender.custodial ? signedInCustody(recorded) : recorded;
}

/** Requests remembered for their answer's summary; the oldest are forgotten first. */
const REMEMBERED_REQUESTS = 4096;

/**
 * What each recent request asked for (its `action`, else its method), so the summary of its answer
 * reads "bob answered alice's get-availability" instead of naming an id. Bounded; keyed by both
 * agents and the JSON-RPC id, so an answer finds only a request its recipient was sent. An answer
 * relayed by another gateway, or after many other requests, reads "alice's request".
 */
export class RequestLabels {
  private readonly labels = new Map<string, string>();

  /** Remembers a request or handoff; returns what an answer to `message` answered, if known. */
  observe(message: AcpMessage, headers: EnvelopeHeaders): string | undefined {
    const id = "id" in message ? message.id : undefined;
    if (id === undefined || id === null) return undefined;
    const from = headers["agent-id"];
    const to = headers["recipient-id"];
    if ("result" in message || "error" in message) {
      const key = `${to}>${from}#${id}`;
      const label = this.labels.get(key);
      this.labels.delete(key);
      return label;
    }
    this.labels.set(`${from}>${to}#${id}`, requestLabel(message));
    if (this.labels.size > REMEMBERED_REQUESTS) {
      const oldest = this.labels.keys().next().value;
      if (oldest !== undefined) this.labels.delete(oldest);
    }
    return undefined;
  }
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
