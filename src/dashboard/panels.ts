import type { FeedHistory } from "./history.js";
import type { Scope } from "./viewer.js";

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

const WEEK_MS = 7 * 24 * 3_600_000;

/** Task handoffs (`agent.handoff` messages) of the last week, newest first. */
export function handoffsPanel(history: FeedHistory): DashboardPanel {
  return {
    name: "handoffs",
    title: "Handoffs",
    async items(scope) {
      const items = await history.query(scope, { type: "handoff", since: Date.now() - WEEK_MS, limit: 200 });
      return items.map((item) => ({
        id: item.id,
        title: `${item.from.agent} → ${item.to.agent}`,
        ...(item.status ? { status: item.status } : {}),
        participants: [item.from.agent, item.to.agent],
        at: item.at,
        lines: [item.summary],
        messageId: item.id,
      }));
    },
  };
}
