import { credentialOf, hashSecret } from "../../gateway/auth.js";
import type { DashboardWatch } from "../../gateway/panels.js";
import { type Router, sendJson } from "../../http/server.js";
import { AcpError, AgentId } from "../../protocol/index.js";
import { dashboardAgents } from "./agents.js";
import { messageDetail } from "./detail.js";
import type { LiveEvent } from "./feed.js";
import { matchesQuery, parseFeedQuery } from "./history.js";
import { PRINCIPAL_TOKENS_BUCKET } from "../../gateway/principals.js";
import { DASHBOARD_API, type DashboardServices, scopeOf } from "./services.js";
import { EventStream } from "../../http/sse.js";
import { OPAQUE_FIELDS, restRecord } from "../../wire/deprecated-names.js";
import { Scope } from "./viewer.js";

/**
 * What a session's answers carry as the coordination files have it (already snake_case: an agent's
 * `started_at`, an event's fields) or keyed by status (`in_progress`): never renamed.
 */
const SESSION_OPAQUE: ReadonlySet<string> = new Set([...OPAQUE_FIELDS, "agent_list", "events", "by_status"]);

/** A message's headers and its relay audit entries are shown as they are written: never renamed. */
const DETAIL_OPAQUE: ReadonlySet<string> = new Set([...OPAQUE_FIELDS, "headers", "audit"]);

/** Read-only views: who am I, agents, the feed (and its live stream), a message, volume, sessions, panels. */
export function viewRoutes(router: Router, services: DashboardServices): void {
  const { ctx, history } = services;

  router.add("GET", `${DASHBOARD_API}/me`, async (req, res) => {
    const scope = await scopeOf(services, req);
    sendJson(
      res,
      200,
      restRecord({
        viewer: scope.viewer,
        agents: scope.agents().map((a) => a.agentId),
        broker: ctx.broker.kind,
        relayAudit: services.relayAudit,
        // Other extensions' admin views are the admin's to know of.
        adminViews: scope.viewer.kind === "admin" ? services.adminViews : [],
        panels: [...services.panels.values()].map(({ name, title }) => ({ name, title })),
      }),
    );
  });

  router.add("GET", `${DASHBOARD_API}/agents`, async (req, res) => {
    const scope = await scopeOf(services, req);
    sendJson(res, 200, restRecord({ agents: await dashboardAgents(ctx, scope) }));
  });

  router.add("GET", `${DASHBOARD_API}/feed`, async (req, res, _params, url) => {
    const scope = await scopeOf(services, req);
    const query = parseFeedQuery(url);
    sendJson(res, 200, restRecord({ items: await history.query(scope, query) }));
  });

  router.add("GET", `${DASHBOARD_API}/volume`, async (req, res, _params, url) => {
    const scope = await scopeOf(services, req);
    sendJson(res, 200, restRecord(await history.volume(scope, parseFeedQuery(url))));
  });

  // Message ids are per sender: `?from=` names the sender.
  router.add("GET", `${DASHBOARD_API}/messages/:id`, async (req, res, { id }, url) => {
    const scope = await scopeOf(services, req);
    const from = url.searchParams.get("from") ?? "";
    if (!AgentId.safeParse(from).success) {
      throw new AcpError("InvalidParams", "name the message's sender: ?from=<agent id>", {
        problems: [{ path: "from", message: "must be the sender's agent id" }],
      });
    }
    const message = { from, id: id as string };
    sendJson(
      res,
      200,
      restRecord(await messageDetail(ctx.broker, ctx.registry, history, scope, message), DETAIL_OPAQUE),
    );
  });

  router.add("GET", `${DASHBOARD_API}/webhooks`, async (req, res) => {
    await scopeOf(services, req);
    sendJson(res, 200, restRecord({ webhooks: services.webhooks.status() }));
  });

  router.add("GET", `${DASHBOARD_API}/sessions`, async (req, res) => {
    const scope = await scopeOf(services, req);
    sendJson(res, 200, restRecord({ sessions: await services.sessions.list(scope) }, SESSION_OPAQUE));
  });

  router.add("GET", `${DASHBOARD_API}/sessions/:id`, async (req, res, { id }) => {
    const scope = await scopeOf(services, req);
    sendJson(res, 200, restRecord(await services.sessions.detail(scope, id as string), SESSION_OPAQUE));
  });

  router.add("GET", `${DASHBOARD_API}/panels/:name`, async (req, res, { name }) => {
    const scope = await scopeOf(services, req);
    const panel = services.panels.get(name as string);
    if (!panel) throw new AcpError("NotFound", `no dashboard panel ${name} on this gateway`);
    sendJson(
      res,
      200,
      restRecord({
        name: panel.name,
        title: panel.title,
        items: await panel.items(scope, { messages: (query) => services.history.query(scope, query) }),
      }),
    );
  });

  router.add("GET", `${DASHBOARD_API}/stream`, async (req, res, _params, url) => {
    let scope = await scopeOf(services, req);
    const { since: _since, until: _until, limit: _limit, ...filters } = parseFeedQuery(url);
    const tokenHash = hashSecret(credentialOf(req.headers) ?? "");
    // The handler returns at once (the response stays open), so a stopping gateway never waits for it.
    const stream = new EventStream(res, services.keepAliveMs);
    services.streams.add(stream);
    // Per stream, events are handled in order; a change to the registry refreshes what it may see first.
    let handled: Promise<void> = Promise.resolve();
    const unsubscribe = services.live.subscribe((event) => {
      handled = handled
        .then(async () => {
          if (event.type === "kv" && event.bucket === PRINCIPAL_TOKENS_BUCKET && event.key === tokenHash) {
            // The token was revoked: the stream ends, and the reconnect is refused.
            if (event.op === "delete") stream.end();
            return;
          }
          if (event.type === "kv" && event.bucket === "agents") scope = await Scope.of(ctx, scope.viewer);
          const next = toStreamEvent(scope, event, filters, services.watches);
          if (next) stream.send(next.event, next.data);
        })
        .catch((err: Error) => ctx.logger.warn({ err: err.message }, "dashboard stream event failed"));
    });
    stream.onClose(() => {
      unsubscribe();
      services.streams.delete(stream);
    });
    stream.send("ready", restRecord({ viewer: scope.viewer }));
  });
}

type StreamFilters = Omit<ReturnType<typeof parseFeedQuery>, "since" | "until" | "limit">;

/** What one viewer's stream gets for a live event: only what it may see, `changed` hints for the rest. */
function toStreamEvent(
  scope: Scope,
  event: LiveEvent,
  filters: StreamFilters,
  watches: readonly DashboardWatch[],
): { event: string; data: unknown } | undefined {
  switch (event.type) {
    case "summary":
      return scope.seesExchange(event.item.from.agent, event.item.to.agent) &&
        matchesQuery(event.item, filters)
        ? { event: "summary", data: restRecord(event.item) }
        : undefined;
    case "status":
      return scope.seesExchange(event.from, event.to)
        ? {
            event: "status",
            data: restRecord({
              id: event.id,
              from: event.from,
              status: event.status,
              retryCount: event.retryCount,
            }),
          }
        : undefined;
    case "kv": {
      const changed = (what: string) => ({ event: "changed", data: { what } });
      if (event.bucket === "presence") return scope.ownsAgent(event.key) ? changed("agents") : undefined;
      if (event.bucket === "handshakes") {
        const [a, b] = event.key.split(".");
        return scope.ownsAgent(a ?? "") || scope.ownsAgent(b ?? "") ? changed("agents") : undefined;
      }
      if (event.bucket === "agents")
        return scope.isAdmin || scope.ownsAgent(event.key) ? changed("agents") : undefined;
      const watch = watches.find((w) => w.bucket === event.bucket);
      if (!watch) return undefined;
      return event.value === null || watch.visible(scope, event.value) ? changed(watch.what) : undefined;
    }
  }
}
