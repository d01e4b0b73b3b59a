import type { ApprovalRecord, ApprovalStore } from "./approvals.js";
import type { CommandAuditSink } from "./audit.js";
import type { ResponseCache } from "./cache.js";
import type { ConfigFileInput, OrchestrationConfig, OrchestrationConfigInput } from "./config.js";
import type { AgentResponse } from "./schemas.js";
import type { InternalErrorLog } from "./targets.js";

/** The Orchestrator's options and the shapes its sending methods take and give. */
export interface OrchestratorOptions {
  /** This orchestrator's agent id: the `from` of its commands (with remote agents, the SDK agent's id). */
  id: string;
  /** The human principal it acts for; shown on approvals and in the audit log. */
  principal?: string;
  /** The `acp:` section of acp.yaml, or the file's whole shape `{ acp: … }`; omitted keys take the defaults. */
  config?: OrchestrationConfig | OrchestrationConfigInput | ConfigFileInput;
  /** Where every command and response is recorded; `false` only for throwaway tools and benchmarks. */
  audit: CommandAuditSink | false;
  /** Needed as soon as a command requires approval. */
  approvals?: ApprovalStore;
  /** The response cache (default: a new one, `cache_ttl` from the configuration); the CLI passes one it keeps on disk. */
  cache?: ResponseCache;
  /** Source of jitter, in [0, 1). Default Math.random. */
  random?: () => number;
  /** Failures that cannot be reported in a response (a response's audit entry that could not be written). */
  onError?: (err: Error) => void;
  /**
   * Where an in-process handler's internal failure (anything but a CommandError) is detailed; its
   * caller only gets a generic agent_error with the correlation id. Default: stderr.
   */
  logInternalError?: InternalErrorLog;
}

/** Options of one `Orchestrator.send` (and of each command a pattern sends). */
export interface CommandSendOptions {
  signal?: AbortSignal;
  /** Overrides the target's registered fallbacks for this command. */
  fallbacks?: string[];
  /** Cache this command's successful response (default: only actions listed in `cacheable_actions`). */
  cacheable?: boolean;
  /** Called once an approval was requested, so a caller can say where to approve it. */
  onApproval?: (approval: ApprovalRecord) => void;
}

/** What `sendAsync` hands back: whether the command was handed over, or the response that refused it. */
export interface AsyncReceipt {
  commandId: string;
  accepted: boolean;
  response?: AgentResponse;
}
