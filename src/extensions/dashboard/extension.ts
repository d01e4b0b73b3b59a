import { resolveContextRoot } from "../../coordination/paths.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { GatewayExtension } from "../../gateway/extension.js";
import { type DashboardPanel, type DashboardWatch, PANEL_NAME } from "../../gateway/panels.js";
import { type Router, readJsonBody, sendJson } from "../../http/server.js";
import type { EventStream } from "../../http/sse.js";
import { restRecord } from "../../wire/deprecated-names.js";
import { LiveFeed } from "./feed.js";
import { FeedIndex } from "./feed-index.js";
import { FeedHistory } from "./history.js";
import { viewRoutes } from "./routes.js";
import { DASHBOARD_API, type DashboardServices, scopeOf } from "./services.js";
import { SessionsView } from "./sessions.js";
import { defaultStaticDir, staticRoutes } from "./static.js";
import { requireAdminViewer } from "./viewer.js";
import { parseWebhookTarget, SummaryWebhooks, type WebhookOptions } from "./webhooks.js";

export interface DashboardOptions {
  /** The gateway's relay audit root (`<data>/relay-audit`): the feed's history. Omit when it keeps none. */
  relayAuditRoot?: string;
  /** Where coordination sessions are read (default: `ACP_CONTEXT_DIR`, else `./.claude/agents/context`). */
  sessionsRoot?: string;
  /** The built web bundle (default: `dist/web` of this package). */
  staticDir?: string;
  /** Incoming-webhook URLs (`slack:`/`discord:` prefixes allowed) that get every relayed message's summary. */
  summaryWebhooks?: string[];
  webhookOptions?: WebhookOptions;
  /** Interval of the live stream's keep-alive comments. Default 15 s. */
  keepAliveMs?: number;
  /** Panels of other extensions (the collaboration extension's handoffs, negotiations and votes). */
  panels?: DashboardPanel[];
  /** Admin views of other extensions mounted on this gateway, which the page links to (`federation`). */
  adminViews?: string[];
  /** Buckets of other extensions whose changes the live stream announces (approvals). */
  watches?: DashboardWatch[];
}

/**
 * The transparency channel as a gateway extension: the dashboard's API under `/api/v1/dashboard`,
 * its single page at `/`, principal tokens, and summaries posted to chat webhooks. `startDefaultGateway`
 * mounts it; webhook URLs are checked here, at construction, so a bad one stops start-up early.
 */
export function dashboardExtension(options: DashboardOptions = {}): GatewayExtension {
  const targets = (options.summaryWebhooks ?? []).map(parseWebhookTarget);
  for (const panel of options.panels ?? []) {
    if (!PANEL_NAME.test(panel.name))
      throw new TypeError(`dashboard panel name ${JSON.stringify(panel.name)} must match ${PANEL_NAME}`);
  }
  return {
    name: "dashboard",
    mount(ctx: GatewayContext, router: Router) {
      const live = new LiveFeed(
        ctx.broker,
        ctx.registry,
        (err) => ctx.logger.warn({ err: (err as Error).message }, "dashboard feed event failed"),
        (listener) => ctx.relay.onAccepted(listener),
      );
      const logError = (err: unknown) =>
        ctx.logger.warn({ err: (err as Error).message }, "relay audit index failed");
      // Next to the relay audit root: <data>/relay-audit-index.db.
      const index =
        options.relayAuditRoot === undefined
          ? undefined
          : FeedIndex.open(
              options.relayAuditRoot,
              `${options.relayAuditRoot}-index.db`,
              logError,
              (fields, msg) => ctx.logger.info(fields, msg),
            );
      index?.catch(logError);
      const history = new FeedHistory(ctx.broker, live, index);
      if (index) {
        // The sender's log has the entry a moment after the relay accepted it.
        ctx.relay.onAccepted(({ entry }) => {
          void index.then(
            (i) => i.changed(entry.from.agent),
            () => undefined,
          );
        });
      }
      const webhooks = new SummaryWebhooks(
        targets,
        ctx.outbound,
        ctx.metrics,
        ctx.logger,
        options.webhookOptions,
      );
      const panels = new Map<string, DashboardPanel>();
      for (const panel of options.panels ?? []) panels.set(panel.name, panel);
      if (webhooks.size > 0) {
        // Every accepted message's summary goes to chat: the relay audit says so (discord_summary).
        ctx.relay.summariesPostedToChat = true;
        live.subscribe((event) => {
          if (event.type === "summary") webhooks.push(event.item);
        });
      }
      const ready = Promise.all([live.start(), index?.then((i) => i.start())]).then(() => undefined);
      // Handlers await `ready`; a failed start-up is logged now and answered there.
      ready.catch((err: Error) => ctx.logger.error({ err: err.message }, "dashboard start-up failed"));
      const services: DashboardServices = {
        ctx,
        live,
        history,
        sessions: new SessionsView(options.sessionsRoot ?? resolveContextRoot()),
        watches: options.watches ?? [],
        webhooks,
        panels,
        streams: new Set<EventStream>(),
        keepAliveMs: options.keepAliveMs ?? 15_000,
        relayAudit: options.relayAuditRoot !== undefined,
        adminViews: options.adminViews ?? [],
        ready,
        index,
      };
      viewRoutes(router, services);
      principalRoutes(router, services);
      staticRoutes(router, options.staticDir ?? defaultStaticDir());
      return {
        async start() {
          webhooks.checkTargets();
          await ready;
        },
        async close() {
          for (const stream of services.streams) stream.end();
          await ready.catch(() => undefined);
          await live.stop();
          await webhooks.close();
          (await index?.catch(() => undefined))?.close();
        },
      };
    },
  };
}

/**
 * Principal tokens, managed with the admin token (`acp principal add|list|revoke`). Answers are
 * snake_case (`principal_id`, `created_at`, `revoked_at`), the camelCase names beside them for the
 * deprecation period.
 */
function principalRoutes(router: Router, services: DashboardServices): void {
  const { ctx } = services;
  const { principals } = ctx;
  router.add("POST", `${DASHBOARD_API}/principals`, async (req, res) => {
    requireAdminViewer((await scopeOf(services, req)).viewer);
    const added = await principals.add(await readJsonBody(req, 64 * 1024));
    ctx.logger.info({ principal: added.principalId }, "principal token issued");
    sendJson(res, 201, restRecord(added));
  });
  router.add("GET", `${DASHBOARD_API}/principals`, async (req, res) => {
    requireAdminViewer((await scopeOf(services, req)).viewer);
    sendJson(res, 200, restRecord({ principals: await principals.list() }));
  });
  router.add("POST", `${DASHBOARD_API}/principals/:id/revoke`, async (req, res, { id }) => {
    requireAdminViewer((await scopeOf(services, req)).viewer);
    const revoked = await principals.revoke(id as string);
    ctx.logger.info({ principal: revoked.principalId }, "principal token revoked");
    sendJson(res, 200, restRecord(revoked));
  });
}
