import type { Scope } from "../extensions/dashboard/viewer.js";

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
  /** A relayed message to open for its full detail. */
  messageId?: string;
}

/**
 * A panel other modules add to the dashboard (`DashboardOptions.panels`): served at
 * `GET /api/v1/dashboard/panels/<name>` and shown in the navigation. `items` must apply the scope:
 * return only what the viewer may see (`scope.seesExchange`, `scope.ownsAgent`).
 */
export interface DashboardPanel {
  name: string;
  title: string;
  items(scope: Scope): Promise<PanelItem[]>;
}

export const PANEL_NAME = /^[a-z][a-z0-9-]{0,63}$/;
