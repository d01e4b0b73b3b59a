import type { IncomingMessage } from "node:http";
import type { GatewayContext } from "../../gateway/context.js";
import type { DashboardPanel, DashboardWatch } from "../../gateway/panels.js";
import type { EventStream } from "../../http/sse.js";
import type { LiveFeed } from "./feed.js";
import type { FeedIndex } from "./feed-index.js";
import type { FeedHistory } from "./history.js";
import type { SessionsView } from "./sessions.js";
import { authenticateViewer, Scope } from "./viewer.js";
import type { SummaryWebhooks } from "./webhooks.js";

export { DASHBOARD_API } from "../../wire/api.js";

/** Everything the dashboard's routes share; built once per gateway by `dashboardExtension`. */
export interface DashboardServices {
  ctx: GatewayContext;
  live: LiveFeed;
  history: FeedHistory;
  sessions: SessionsView;
  watches: DashboardWatch[];
  webhooks: SummaryWebhooks;
  panels: Map<string, DashboardPanel>;
  streams: Set<EventStream>;
  keepAliveMs: number;
  relayAudit: boolean;
  /** DashboardOptions.adminViews. */
  adminViews: string[];
  /** Start-up (KV watches, the broker's change feed, the relay audit index opened) finished. */
  ready: Promise<void>;
  /** The relay audit's index (feed-index.ts), when the gateway keeps a relay audit. */
  index: Promise<FeedIndex> | undefined;
}

/** Authenticates the viewer and computes what it may see; every dashboard endpoint starts here. */
export async function scopeOf(services: DashboardServices, req: IncomingMessage): Promise<Scope> {
  await services.ready;
  const viewer = await authenticateViewer(services.ctx, req);
  return Scope.of(services.ctx, viewer);
}
