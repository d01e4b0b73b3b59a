import { restRecord } from "../../wire/deprecated-names.js";
import type { StatusEvent, StatusRecord } from "../../collab/contracts.js";
import type { Unsubscribe } from "../../broker/index.js";
import { EventStream } from "../../http/sse.js";
import { authenticate, authenticateAgent } from "../../gateway/context.js";
import { type Router, sendJson } from "../../http/server.js";
import { AcpError, AgentId } from "../../protocol/index.js";
import { CollabMethod, StatusBody } from "../../collab/messages.js";
import { auditParty, type CollabServices, liveAgent, readerOf } from "./services.js";
import { bucketOf } from "./store.js";

/**
 * Status broadcasting (the ACP messaging platform): an agent publishes availability, load, health metrics and
 * tasks as a signed `agent.status`; online/offline comes from its connections (the gateway's presence
 * tracker). Subscribers follow any set of agents as Server-Sent Events, fed by KV watches, so an update made
 * through any gateway on one NATS reaches subscribers on every gateway.
 */
export function statusRoutes(
  router: Pick<Router, "add">,
  services: CollabServices,
): { start(): Promise<void>; stop(): void } {
  const { ctx, intake, audit } = services;
  const statuses = bucketOf<StatusRecord>(ctx.broker, "status");
  const subscribers = new Set<{ agents: Set<string> | null; push(event: StatusEvent): void }>();
  const unwatch: Unsubscribe[] = [];
  const publish = (event: StatusEvent) => {
    for (const s of subscribers) if (s.agents === null || s.agents.has(event.agentId)) s.push(event);
  };

  router.add("POST", "/api/v1/status", async (req, res) => {
    const caller = await authenticateAgent(ctx, req);
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.status,
      body: StatusBody,
      to: "self",
    });
    const agentId = caller.record.agentId;
    await ctx.presence.update(agentId, action.body);
    const record: StatusRecord = {
      agentId,
      messageId: action.headers["message-id"],
      at: action.headers.timestamp,
      update: action.body,
      envelope: action.message,
    };
    await statuses.put(`s.${agentId}`, record);
    audit.record({
      method: CollabMethod.status,
      from: auditParty(caller.record),
      to: auditParty(caller.record),
      id: record.messageId,
      messageId: record.messageId,
      summary: `${agentId} published its status${action.body.state ? ` (${action.body.state})` : ""}.`,
    });
    sendJson(res, 200, restRecord({ agentId, presence: await ctx.presence.get(agentId), status: record }));
  });

  router.add("GET", "/api/v1/status/stream", async (req, res, _params, url) => {
    const caller = await authenticate(ctx, req);
    const list = url.searchParams.get("agents");
    const agents = list ? new Set(list.split(",").filter(Boolean)) : null;
    for (const agent of agents ?? []) {
      if (!AgentId.safeParse(agent).success) {
        throw new AcpError("InvalidParams", `agents: ${JSON.stringify(agent)} is not an agent id`, {
          problems: [{ path: "/agents", message: `${agent} is not an agent id` }],
        });
      }
    }
    const stream = new EventStream(res, services.keepAliveMs);
    const subscriber = { agents, push: (event: StatusEvent) => stream.send(event.type, restRecord(event)) };
    subscribers.add(subscriber);
    services.streams.add(stream);
    // An agent's stream ends when its key is rotated or the agent revoked.
    const releaseKey =
      caller.kind === "agent" ? ctx.openedByKey.track(caller.agent, () => stream.end()) : () => undefined;
    stream.onClose(() => {
      releaseKey();
      subscribers.delete(subscriber);
      services.streams.delete(stream);
    });
    // Where everyone stands now, then every change as it happens.
    const ids = agents ? [...agents] : (await ctx.registry.list()).map((r) => r.agentId);
    for (const agentId of ids)
      stream.send(
        "presence",
        restRecord({ type: "presence", agentId, presence: await ctx.presence.get(agentId) }),
      );
  });

  router.add("GET", "/api/v1/status/:agent_id", async (req, res, params) => {
    await readerOf(ctx, req);
    const agentId = params.agent_id as string;
    await liveAgent(ctx, agentId, "/agent_id");
    sendJson(
      res,
      200,
      restRecord({
        agentId,
        presence: await ctx.presence.get(agentId),
        status: (await statuses.get(`s.${agentId}`))?.value ?? null,
      }),
    );
  });

  return {
    async start() {
      unwatch.push(
        await ctx.broker.kv<Parameters<typeof ctx.presence.effective>[0]>("presence").watch((change) => {
          publish({
            type: "presence",
            agentId: change.key,
            presence: ctx.presence.effective(change.value ?? undefined),
          });
        }),
      );
      unwatch.push(
        await statuses.watch((change) => {
          if (change.value) publish({ type: "status", agentId: change.value.agentId, status: change.value });
        }),
      );
    },
    stop() {
      for (const u of unwatch.splice(0)) u();
      subscribers.clear();
    },
  };
}
