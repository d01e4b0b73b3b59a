import type { GatewayContext } from "../../../gateway/context.js";
import { authenticate, requireAdmin } from "../../../gateway/context.js";
import { type Router, readJsonBody, sendJson } from "../../../http/server.js";
import { A2A_REMOTE_AGENTS_PATH as OUTBOUND_PATH } from "../../../wire/a2a-outbound.js";
import { restRecord } from "../../../wire/deprecated-names.js";
import type { A2AOutboundBridge } from "./bridge.js";

/**
 * Registering external A2A agents: admin-only writes; any agent may list them (they are in the
 * ordinary agent directory too, as `a2a` agents). Answers are snake_case, with the camelCase names
 * beside them for the deprecation period.
 */
export function outboundRoutes(
  router: Router,
  ctx: GatewayContext,
  bridge: () => Promise<A2AOutboundBridge>,
): void {
  router.add("POST", OUTBOUND_PATH, async (req, res) => {
    await requireAdmin(ctx, req);
    const record = await (await bridge()).register(await readJsonBody(req, 256 * 1024));
    sendJson(res, 201, restRecord(record));
  });

  router.add("GET", OUTBOUND_PATH, async (req, res) => {
    await authenticate(ctx, req);
    sendJson(res, 200, restRecord({ agents: await (await bridge()).list() }));
  });

  router.add("GET", `${OUTBOUND_PATH}/:id`, async (req, res, { id }) => {
    await authenticate(ctx, req);
    sendJson(res, 200, restRecord(await (await bridge()).get(id as string)));
  });

  router.add("DELETE", `${OUTBOUND_PATH}/:id`, async (req, res, { id }) => {
    await requireAdmin(ctx, req);
    await (await bridge()).remove(id as string);
    ctx.logger.info({ agent: id }, "A2A agent removed");
    sendJson(res, 200, restRecord({ agentId: id, removed: true }));
  });
}
