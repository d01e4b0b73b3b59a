/** The API's shapes, straight from the server's definitions (type-only: nothing of the server is bundled). */

export type { DashboardAgent, PeerView } from "../../src/dashboard/agents.js";
export type { MessageDetail } from "../../src/dashboard/detail.js";
export type { FeedItem } from "../../src/dashboard/feed.js";
export type { VolumeBucket } from "../../src/dashboard/history.js";
export type { PanelItem } from "../../src/dashboard/panels.js";
export type { SessionAgentView, SessionDetail, SessionSummary } from "../../src/dashboard/sessions.js";
export type { Viewer } from "../../src/dashboard/viewer.js";
export type { WebhookStatus } from "../../src/dashboard/webhooks.js";
export type { ApprovalRecord } from "../../src/orchestration/approvals.js";

export interface Me {
  viewer: import("../../src/dashboard/viewer.js").Viewer;
  agents: string[];
  broker: string;
  relayAudit: boolean;
  panels: { name: string; title: string }[];
}
