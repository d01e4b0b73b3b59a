import type { HandshakeStep } from "../audit/entry.js";
import { type AuditEntryForOptions, AuditLog, auditEntryFor } from "../audit/index.js";

export interface AuditSettings {
  /** Audit root; default `$ACP_AUDIT_DIR`, else `./.acp/audit`. The log is `<root>/<agent-id>/`. */
  root?: string;
  /** fdatasync every entry (slower; survives power loss). Default false. */
  fsync?: boolean;
}

export interface AuditNote {
  direction: "sent" | "received";
  peer: { agent: string; principal?: string | undefined };
  summary?: string | undefined;
  step?: HandshakeStep;
  error?: { code: number; message: string };
}

/**
 * The agent's side of the ACP core protocol's audit requirement: every substantive message and every
 * handshake step, sent and received, goes to its append-only log with a human-readable summary (an encrypted
 * body is only said to exist). A failing log never stops message flow; it is reported as an error.
 */
export class AgentAudit {
  private constructor(
    private readonly log: AuditLog,
    private readonly self: { agent: string; principal: string },
    private readonly onError: (err: Error) => void,
  ) {}

  static async open(
    self: { agent: string; principal: string },
    settings: AuditSettings,
    onError: (err: Error) => void,
  ): Promise<AgentAudit> {
    const log = await AuditLog.open({
      agent: self.agent,
      root: settings.root,
      fsync: settings.fsync ?? false,
      // Several processes may act as one agent (an `acp inbox --follow` and an `acp send`).
      writers: "shared",
    });
    return new AgentAudit(log, self, onError);
  }

  get directory(): string {
    return this.log.dir;
  }

  /** Appends one entry; resolves once written (or once the failure was reported). */
  async record(message: unknown, note: AuditNote): Promise<void> {
    const recipient = note.direction === "sent" ? note.peer.agent : this.self.agent;
    const options: AuditEntryForOptions = {
      direction: note.direction,
      channel: `gateway:agent.${recipient}.inbox`,
      self: this.self,
      peer: { agent: note.peer.agent, ...(note.peer.principal ? { principal: note.peer.principal } : {}) },
      ...(note.summary !== undefined ? { summary: note.summary } : {}),
      ...(note.step ? { step: note.step } : {}),
      ...(note.error ? { error: note.error } : {}),
    };
    try {
      await this.log.append(auditEntryFor(message, options));
    } catch (err) {
      this.onError(err as Error);
    }
  }

  close(): Promise<void> {
    return this.log.close();
  }
}
