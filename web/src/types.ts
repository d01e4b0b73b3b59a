/** The API's shapes, straight from the server's definitions (type-only: nothing of the server is bundled). */

type SnakeCased<T> = import("../../src/wire/deprecated-names.js").SnakeCased<T>;

/** An agent as `/agents` answers it: snake_case (`agent_id`, `presence.last_seen`, `peers[].peer_side`). */
export type DashboardAgent = SnakeCased<import("../../src/extensions/dashboard/agents.js").DashboardAgent>;
export type PeerView = DashboardAgent["peers"][number];
/** `/messages/:id`, snake_case (`retry_count`, `dead_letter`); its headers and audit entries as written. */
export type MessageDetail = SnakeCased<
  Omit<import("../../src/extensions/dashboard/detail.js").MessageDetail, "headers" | "audit">
> &
  Pick<import("../../src/extensions/dashboard/detail.js").MessageDetail, "headers" | "audit">;
/** A feed item (`/feed`, the stream's `summary`), snake_case (`summary_by`, `retry_count`). */
export type FeedItem = SnakeCased<import("../../src/extensions/dashboard/feed.js").FeedItem>;
/** A bucket of `/volume` (`{bucket_ms, buckets}`), snake_case (`by_type`). */
export type VolumeBucket = import("../../src/wire/deprecated-names.js").SnakeCased<
  import("../../src/extensions/dashboard/history.js").VolumeBucket
>;
/** An item of `/panels/:name`, snake_case (`message_id`, `message_from`). */
export type PanelItem = SnakeCased<import("../../src/gateway/panels.js").PanelItem>;
export type { SessionAgentView, SessionReportView } from "../../src/extensions/dashboard/sessions.js";
/** `/sessions` and `/sessions/:id`, snake_case (`started_at`, `agent_list`, `event_count`). */
export type SessionSummary = SnakeCased<import("../../src/extensions/dashboard/sessions.js").SessionSummary>;
export type SessionDetail = SnakeCased<
  Omit<import("../../src/extensions/dashboard/sessions.js").SessionDetail, "agentList" | "events">
> &
  Pick<import("../../src/extensions/dashboard/sessions.js").SessionDetail, "events"> & {
    agent_list: import("../../src/extensions/dashboard/sessions.js").SessionAgentView[];
  };
export type { Viewer } from "../../src/extensions/dashboard/viewer.js";
/** A webhook's status as `/webhooks` answers it: snake_case (`last_error_at`…). */
export type WebhookStatus = import("../../src/wire/deprecated-names.js").SnakeCased<
  import("../../src/extensions/dashboard/webhooks.js").WebhookStatus
>;
/** An approval as the API answers it: snake_case (`requested_by`, `created_at`…); its command as sent. */
export type ApprovalView = import("../../src/wire/deprecated-names.js").SnakeCasedFields<
  import("../../src/orchestration/approvals.js").ApprovalRecord
>;
/** The federation admin API's answers, read by their snake_case names (`pinned_keys`, `link.last_error`). */
export type FederationStatusView = import("../../src/wire/deprecated-names.js").SnakeCased<
  import("../../src/wire/federation.js").FederationStatusView
>;
export type FederationPeer = FederationStatusView["peers"][number];

/** `/me`, snake_case (`relay_audit`, `viewer.principal_id`). */
export interface Me {
  viewer: import("../../src/wire/deprecated-names.js").SnakeCased<
    import("../../src/extensions/dashboard/viewer.js").Viewer
  >;
  agents: string[];
  broker: string;
  relay_audit: boolean;
  /** Admin views of other extensions this gateway mounts (`federation`); empty for a principal. */
  admin_views: string[];
  panels: { name: string; title: string }[];
}
