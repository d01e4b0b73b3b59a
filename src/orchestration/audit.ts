import { AuditLog } from "../audit/index.js";
import type { Action, AgentCommand, AgentResponse, Status } from "./schemas.js";

/**
 * The command layer's `AuditEntry`, one per command and per response. `commandId` is an addition:
 * the layer's entry cannot say which command a response answers. `to` of a response is the command's
 * sender (the layer's sample wrote the responder there, so a response looked addressed to itself).
 */
export interface CommandAuditEntry {
  timestamp: string;
  messageId: string;
  type: "command" | "response";
  from: string;
  to: string;
  action?: Action;
  status?: Status;
  commandId?: string;
}

/** Where the orchestrator records its entries. `record` resolving means the entry is durable. */
export interface CommandAuditSink {
  /**
   * Records one command sent or response received; resolves once it is stored, so a crash loses nothing
   * acknowledged.
   */
  record(entry: CommandAuditEntry): Promise<void>;
  /** Closes what the sink opened itself; a sink given an open log leaves it to its owner. */
  close?(): Promise<void>;
}

export function commandEntry(command: AgentCommand): CommandAuditEntry {
  return {
    timestamp: command.timestamp,
    messageId: command.id,
    type: "command",
    from: command.from,
    to: command.to,
    action: command.action,
  };
}

export function responseEntry(
  response: AgentResponse,
  command: { from: string; action?: Action },
): CommandAuditEntry {
  return {
    timestamp: response.timestamp,
    messageId: response.id,
    type: "response",
    from: response.from,
    to: command.from,
    ...(command.action ? { action: command.action } : {}),
    status: response.status,
    commandId: response.commandId,
  };
}

const shorten = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/**
 * Writes command entries into an ACP audit log (`acp-kit/audit`): hash-chained, append-only, and
 * readable with `acp audit show`. The command layer's AuditEntry fields are entry fields, so `jq`
 * can filter on them: `type` (`command` or `response`), `action`, `status`, `messageId` (the
 * AgentCommand's or AgentResponse's own id), and the agents in `from.agent` / `to.agent`; `id` is
 * the command id on both, pairing a response with its command. Summaries name the action and status,
 * never parameter values.
 */
export class AuditLogCommandSink implements CommandAuditSink {
  constructor(
    private readonly log: AuditLog,
    private readonly principal: string | null = null,
    private readonly ownsLog = false,
  ) {}

  /** Opens `<root>/<agent>/` (default agent name: `<orchestrator-id>-commands`, so it never collides with the SDK agent's own log). */
  static async open(options: { agent: string; root?: string; principal?: string; fsync?: boolean }) {
    const log = await AuditLog.open({
      agent: options.agent,
      ...(options.root !== undefined ? { root: options.root } : {}),
      ...(options.fsync !== undefined ? { fsync: options.fsync } : {}),
    });
    return new AuditLogCommandSink(log, options.principal ?? null, true);
  }

  /** The directory of the audit log the entries go to (`<root>/<agent>/`), for `acp audit show`. */
  get directory(): string {
    return this.log.dir;
  }

  async record(entry: CommandAuditEntry): Promise<void> {
    const command = entry.type === "command";
    const summary = command
      ? `Command ${entry.action} to ${entry.to} (command ${entry.messageId}).`
      : `Response ${entry.status} from ${entry.from} to ${entry.action ?? "command"} ${entry.commandId}.`;
    await this.log.append({
      direction: command ? "sent" : "received",
      from: { agent: entry.from, principal: command ? this.principal : null },
      to: { agent: entry.to, principal: command ? null : this.principal },
      type: entry.type,
      method: "agent.command",
      id: command ? entry.messageId : (entry.commandId ?? null),
      messageId: entry.messageId,
      ...(entry.action !== undefined ? { action: entry.action } : {}),
      ...(entry.status !== undefined ? { status: entry.status } : {}),
      summary: shorten(summary, 240),
      channel: "orchestrator",
    });
  }

  async close(): Promise<void> {
    if (this.ownsLog) await this.log.close();
  }
}
