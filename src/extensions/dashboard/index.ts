/**
 * acp-kit/dashboard: the transparency channel (seed 000, "dual-mode transport"). Principals watch
 * concise summaries of their agents' exchanges live in a web dashboard served by the gateway, and
 * in chat rooms through Slack- or Discord-compatible webhooks. docs/dashboard.md describes it.
 */
export type { DashboardAgent, HandshakeSide, PeerView } from "./agents.js";
export { PrincipalAdminClient } from "../../client/principals.js";
export type { MessageDetail, SignatureCheck, TimelineStep } from "./detail.js";
export { type DashboardOptions, dashboardExtension } from "./extension.js";
export { encryptedSummary, type FeedItem, type LiveEvent, LiveFeed } from "./feed.js";
export { FeedHistory, type FeedQuery, parseFeedQuery, type VolumeBucket } from "./history.js";
export {
  type DashboardPanel,
  type DashboardWatch,
  PANEL_NAME,
  type PanelItem,
  type PanelMessage,
  type PanelScope,
  type PanelSources,
} from "../../gateway/panels.js";
export {
  PRINCIPAL_TOKENS_BUCKET,
  PRINCIPALS_BUCKET,
  type PrincipalRecord,
  PrincipalStore,
} from "../../gateway/principals.js";
export { DASHBOARD_API, type PrincipalView } from "../../wire/api.js";
export type { SessionDetail, SessionSummary } from "./sessions.js";
export { Scope, type Viewer } from "./viewer.js";
export {
  chatLine,
  parseWebhookTarget,
  SummaryWebhooks,
  type WebhookKind,
  type WebhookOptions,
  type WebhookStatus,
  type WebhookTarget,
} from "./webhooks.js";
