import type { MessageStatus } from "../broker/index.js";
import type { MessageType } from "../protocol/index.js";

/**
 * The dashboard's contract with the extensions that show something on it (collaboration panels,
 * approvals): the composition root hands their panels and watched buckets to the dashboard, so
 * neither imports the other.
 */

/** What one viewer may see; the dashboard decides it on the server for every request. */
export interface PanelScope {
  readonly isAdmin: boolean;
  /** The viewer owns this agent (the admin: every agent). */
  ownsAgent(agentId: string): boolean;
  /** An exchange is visible when either side is one of the viewer's agents. */
  seesExchange(from: string, to: string): boolean;
  /** The viewer may act as this principal: the admin for everyone, a principal for itself. */
  actsFor(principalId: string | null): boolean;
  /** How decisions made by this viewer are signed in records: `admin` or `principal:<id>`. */
  readonly actor: string;
}

/** A relayed message as a panel may list it (a dashboard feed item). */
export interface PanelMessage {
  id: string;
  at: string;
  from: { agent: string };
  to: { agent: string };
  summary: string;
  status?: MessageStatus;
}

/** What the dashboard offers a panel besides the scope. */
export interface PanelSources {
  /** Relayed messages the viewer may see, newest first. */
  messages(query: { type?: MessageType; since?: number; limit: number }): Promise<PanelMessage[]>;
}

/** One row of a generic panel: what a person needs to follow a negotiation, a vote, a handoff… */
export interface PanelItem {
  id: string;
  title: string;
  /** A short state word (open, agreed, accepted, …). */
  status?: string;
  /** Agent ids involved; the dashboard links those the viewer owns. */
  participants: string[];
  /** When it last changed (ISO 8601). */
  at?: string;
  /** Lines of detail, oldest first (rounds, ballots, signatures, …). */
  lines?: string[];
  /** A relayed message to open for its full detail: its id, and its sender (ids are per sender). */
  messageId?: string;
  messageFrom?: string;
}

/**
 * A panel other modules add to the dashboard (`DashboardOptions.panels`): served at
 * `GET /api/v1/dashboard/panels/<name>` and shown in the navigation. `items` must apply the scope:
 * return only what the viewer may see (`scope.seesExchange`, `scope.ownsAgent`).
 */
export interface DashboardPanel {
  name: string;
  title: string;
  items(scope: PanelScope, sources: PanelSources): Promise<PanelItem[]>;
}

/**
 * A KV bucket whose changes the dashboard's live stream announces (`event: changed`, `data.what`)
 * to the viewers who may see the changed value.
 */
export interface DashboardWatch {
  bucket: string;
  what: string;
  visible(scope: PanelScope, value: unknown): boolean;
}

export const PANEL_NAME = /^[a-z][a-z0-9-]{0,63}$/;
