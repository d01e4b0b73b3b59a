import type { MessageRecord, MessageStatus } from "../broker/index.js";
import type { AgentView } from "../wire/agents.js";
import type { AgentRecord, ResolvedAgent } from "./registry.js";

/**
 * Agents of other gateways (federation: src/extensions/federation, docs/federation.md). The core
 * knows them only through this interface, which the federation extension sets as
 * `registry.remote` when it starts (like `registry.custodian`); without it, a message to an
 * address of another domain is refused as an unknown recipient.
 */
export interface RemoteAgents {
  /** This gateway's federation domain: an address of it names one of its own agents. */
  readonly domain: string;
  /**
   * The agent an address of another domain names, from its home gateway's signed directory, and
   * the broker inbox its messages wait in here (its domain's outbound queue). Throws an AcpError
   * when this gateway does not forward to that domain or the agent is not there.
   */
  recipient(address: string): Promise<RemoteRecipient>;
  /** What GET /api/v1/agents/:address shows of an agent of another domain; undefined when unknown. */
  view(address: string): Promise<AgentView | undefined>;
  /**
   * The agents of other domains this gateway knows of: those it looked up lately in their home
   * directories (to send to them, to verify them, for a caller who named them), not revoked, of
   * domains it still exchanges messages with. By address. Peers publish no listing of their agents.
   */
  known(): AgentRecord[];
  /**
   * The remote recipient's progress with a message queued here for another domain (undefined for
   * any other message), for the status the sender reads.
   */
  progress(record: MessageRecord): Promise<RemoteProgress | undefined>;
}

/** An agent of another domain: its directory entry as a registry record, and where it is queued. */
export interface RemoteRecipient extends ResolvedAgent {
  /** The broker inbox messages to it wait in at this gateway: its domain's outbound queue. */
  inbox: string;
}

/**
 * The end-to-end status of a message to another domain: `queued` (here), `forwarded` (stored at the
 * recipient's gateway), then the recipient's own `delivered`, `acknowledged`, `failed` or `expired`.
 */
export interface RemoteProgress {
  /** The recipient's address. */
  to: string;
  /** Its domain. */
  peer: string;
  status: MessageStatus | "forwarded";
  forwardedAt?: string;
  deliveredAt?: string;
  acknowledgedAt?: string;
  failedAt?: string;
  expiredAt?: string;
  retryCount?: number;
  deadLetter?: { reason: string; detail: string; at: string };
}

/** Where the relay stores a message that arrived from a peer gateway on behalf of one of its agents. */
export interface ArrivedFrom {
  /** The peer's inbox name (`_fed_<domain>`): the broker's `from` of what it delivers here. */
  via: string;
  /** How old its timestamp may be: it may have waited this long in the peer's queue (its retention). */
  maxAgeMs: number;
}
