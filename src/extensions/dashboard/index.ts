/**
 * acp-kit/dashboard: the transparency channel (the ACP core protocol's "dual-mode transport"). Principals
 * watch concise summaries of their agents' exchanges live in a web dashboard served by the gateway, and in
 * chat rooms through Slack- or Discord-compatible webhooks. docs/dashboard.md describes it. This subpath
 * mounts it (`dashboardExtension`) and types its records; the principals' store and the panels other
 * extensions add are `acp-kit/gateway`'s, the admin client of principals `acp-kit/client`'s.
 */
export type { DashboardAgent, HandshakeSide, PeerView } from "./agents.js";
export type { MessageDetail, SignatureCheck, TimelineStep } from "./detail.js";
export { type DashboardOptions, dashboardExtension } from "./extension.js";
export type { FeedItem } from "./feed.js";
export type { VolumeBucket } from "./history.js";
export type { SessionDetail, SessionSummary } from "./sessions.js";
export { parseWebhookTarget, type WebhookKind, type WebhookStatus, type WebhookTarget } from "./webhooks.js";
