/**
 * The wire contract of the outbound A2A bridge's admin API (`acp agent add-a2a` and the gateway's
 * `/api/v1/a2a/remote-agents`), shared by the CLI and the extension (docs/a2a.md).
 */
import type { RestAnswer } from "./deprecated-names.js";

export const A2A_REMOTE_AGENTS_PATH = "/api/v1/a2a/remote-agents";

/**
 * The capability the registry lists for an external A2A agent behind the bridge. It is not `a2a`
 * (A2A_CAPABILITY in wire/a2a.ts), which opts an ACP agent in to being published to A2A clients:
 * an external A2A agent is reached through the bridge, never published back as an A2A agent.
 */
export const A2A_REMOTE_CAPABILITY = "a2a-remote";

/**
 * What the bridge tells the requester while its A2A task runs, each naming the request in
 * `body.messageId`: `status` on each state change, `progress` for each interim message or artifact.
 */
export const A2A_STATUS_METHOD = "agent.a2a.status";
export const A2A_PROGRESS_METHOD = "agent.a2a.progress";

/** How the registered card's signature was checked (A2A §8.4). */
export interface CardVerification {
  signed: boolean;
  /** The key id of the signature that verified. */
  kid?: string;
  /** Where the key came from: pinned by the admin, or the card's `jku` on its own origin. */
  keySource?: "pinned" | "jku";
}

/** What the gateway keeps per registered A2A agent (bucket `a2a-outbound`, key = its ACP agent id). */
export interface OutboundAgentRecord {
  agentId: string;
  /** `a2a:<host of the card>` unless the admin chose one. */
  principalId: string;
  name: string;
  cardUrl: string;
  /** The card's JSON-RPC endpoint the bridge calls. */
  endpoint: string;
  /** The endpoint's origin when it is not the card's: the admin's opt-in at registration. */
  endpointOrigin?: string;
  /** The A2A version the agent speaks when not 1.0 (an A2A 0.3 agent: "0.3.0"…). */
  protocolVersion?: string;
  streaming: boolean;
  skills: string[];
  signature: CardVerification;
  /** The bridge key (`x`) registered for it: only the gateway holding that key serves it. */
  bridgeKey: string;
  /** The names of the headers sent with credentials (their values are sealed, never returned). */
  credentials?: string[];
  /** What registration found worth a look, e.g. credentials the card asks for that were not given. */
  warnings?: string[];
  registeredAt: string;
}

/**
 * A registration as the admin API answers it: snake_case (`agent_id`, `card_url`,
 * `signature.key_source`), each field also under its camelCase name for the deprecation period.
 */
export type OutboundAgentAnswer = RestAnswer<OutboundAgentRecord>;
