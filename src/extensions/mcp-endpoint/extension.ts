/**
 * The gateway's MCP endpoint (the ACP messaging platform's, with the MCP agents capability), mounted by
 * `startDefaultGateway` (src/server.ts) as the extension `mcp`:
 * - Streamable HTTP at `/mcp` (POST, GET, DELETE; `Mcp-Session-Id`);
 * - the legacy HTTP+SSE pair: `GET /mcp/sse` (first event `endpoint`) and `POST /mcp/messages/{id}`;
 * - `PUT|DELETE /api/v1/mcp/agents/{name}`, where agents publish the MCP agents they serve.
 * Every request carries an agent's API key; a session belongs to the agent that opened it. Each
 * session has its own server offering `agents/list` / `agents/run` over the gateway's agents, the
 * task resources, tools and prompt, and (with a context root) coordination sessions.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { brokerToAcp } from "../../broker/errors.js";
import type { WatchOptions } from "../../coordination/index.js";
import { CONTEXT_ROOT_ENV } from "../../coordination/paths.js";
import { refuseForeignBrowser } from "../../gateway/address.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { GatewayExtension } from "../../gateway/extension.js";
import { type Router, readJsonBody, sendError, sendJson } from "../../http/server.js";
import { addAgentTools } from "../../mcp/agent-tools.js";
import { addCoordinationResources } from "../../mcp/coordination.js";
import { answerToBadParams } from "../../mcp/params-guard.js";
import { createAgentsMcpServer, type Transport } from "../../mcp/sdk-adapter.js";
import { ResourceSubscriptions } from "../../mcp/subscriptions.js";
import { AcpError } from "../../protocol/index.js";
import { GatewayAgentSource, publishRoutes } from "./agents.js";
import { McpBridge } from "./bridge.js";
import { LegacySseTransport } from "./legacy-sse.js";
import { noOAuthRoutes } from "./no-oauth.js";
import { authenticateMcp, type McpSessionStats, McpSessions, type SessionCaller } from "./sessions.js";
import { addTaskTools } from "./task-tools.js";
import { addSystemPrompt, addTaskResources, type TaskSource } from "./tasks.js";

export interface McpEndpointOptions {
  /** The tasks offered (`tasks://…`, the task tools): the collaboration extension's `handoffs`. */
  tasks: TaskSource;
  /** A session without traffic for this long is closed and freed. Default 10 minutes (the ACP messaging platform). */
  idleTimeoutMs?: number;
  /** Open sessions one agent may hold (default 64); the next initialize gets 429 / -32013. */
  maxSessionsPerAgent?: number;
  /** Interval of the SSE keep-alive comments. Default 20 s. */
  keepAliveMs?: number;
  /** Agents per `agents/list` page. Default 50. */
  pageSize?: number;
  /** Longest an `agents/run` may take at the target agent. Default 5 minutes. */
  runTimeoutMs?: number;
  /** Audit log root of the gateway's bridge agent; omitted: none. */
  auditRoot?: string;
  /** Coordination sessions offered as `coordination://…` (default `$ACP_CONTEXT_DIR`; unset: none). */
  coordinationRoot?: string;
  coordinationWatch?: WatchOptions;
}

export interface McpEndpointStats extends McpSessionStats {
  /** Runs under way through the bridge agent. */
  runs: number;
}

export interface McpEndpointExtension extends GatewayExtension {
  /** Sessions and what they hold, for monitoring and leak checks. */
  stats(): McpEndpointStats;
}

export const MCP_PATH = "/mcp";
const LEGACY_SSE_PATH = "/mcp/sse";
const LEGACY_POST_PATH = "/mcp/messages";
const SERVER_INFO = { name: "acp-gateway", version: "0.1.0" };
const INSTRUCTIONS =
  "An ACP gateway. The tools list_agents and ask_agent (and the methods agents/list and agents/run) reach " +
  "every agent registered here; tasks://pending lists the tasks handed off to you (subscribe to it); the " +
  "prompt system-prompt explains your role and tools.";

/**
 * The gateway's MCP endpoint at `/mcp` (Streamable HTTP, and the legacy HTTP+SSE pair): each agent's MCP
 * sessions reach every agent of the gateway (`agents/list`, `agents/run`, the tools list_agents and
 * ask_agent), its tasks and coordination sessions.
 */
export function mcpEndpointExtension(options: McpEndpointOptions): McpEndpointExtension {
  const keepAliveMs = options.keepAliveMs ?? 20_000;
  const coordinationRoot = options.coordinationRoot ?? process.env[CONTEXT_ROOT_ENV];
  let sessions: McpSessions | undefined;
  let bridge: McpBridge | undefined;

  return {
    name: "mcp",
    mount(ctx: GatewayContext, router: Router) {
      const open = new McpSessions(
        options.idleTimeoutMs ?? 10 * 60_000,
        ctx.logger,
        ctx.openedByKey,
        options.maxSessionsPerAgent,
      );
      const runs = new McpBridge(ctx, {
        runTimeoutMs: options.runTimeoutMs ?? 5 * 60_000,
        ...(options.auditRoot !== undefined && { auditRoot: options.auditRoot }),
      });
      sessions = open;
      bridge = runs;

      /** One server per session, for the agent in `state`. */
      const serverFor = (state: SessionCaller) => {
        const server = createAgentsMcpServer({
          ...SERVER_INFO,
          instructions: INSTRUCTIONS,
          agents: new GatewayAgentSource(ctx, runs, () => state.caller, options.pageSize ?? 50),
        });
        addAgentTools(server, server.agents);
        const subscriptions = new ResourceSubscriptions(server);
        const tasks = { ctx, caller: () => state.caller, tasks: options.tasks };
        addTaskResources(server, subscriptions, tasks);
        addTaskTools(server, tasks);
        addSystemPrompt(server, tasks, { agents: true, coordination: coordinationRoot !== undefined });
        if (coordinationRoot !== undefined) {
          addCoordinationResources(server, subscriptions, {
            root: coordinationRoot,
            // An agent sees the sessions it takes part in, as on the dashboard.
            visible: (coordination) => state.caller.record.agentId in coordination.agents,
            ...(options.coordinationWatch !== undefined && { watch: options.coordinationWatch }),
          });
        }
        return { server, subscriptions };
      };

      /** Every message the session sends is traffic too (a long run streaming keeps it alive). */
      const countTraffic = (transport: Transport, id: () => string | undefined) => {
        const send = transport.send.bind(transport);
        transport.send = (message, sendOptions) => {
          const sessionId = id();
          if (sessionId !== undefined) open.touch(sessionId);
          return send(message, sendOptions);
        };
      };

      // Streams stay open for as long as the client wants: handled without holding the gateway's
      // request slot (which its shutdown waits for), with the socket's inactivity timeout off.
      const detach = (res: ServerResponse, work: Promise<void>) => {
        res.setTimeout(0);
        work.catch((err: unknown) => {
          ctx.logger.warn({ err: (err as Error).message }, "MCP request failed");
          if (!res.headersSent) sendError(res, brokerToAcp(err));
          else res.destroy();
        });
      };

      // Read here rather than by the SDK's transport, so that bad params it would refuse whole, or
      // not recognise as an initialize, are answered -32602 naming the field (params-guard.ts).
      const postedBody = (req: IncomingMessage) =>
        req.method === "POST" ? readJsonBody(req, ctx.maxEnvelopeBytes) : Promise.resolve(undefined);
      const refuseBadParams = (res: ServerResponse, body: unknown): boolean => {
        const refusal = answerToBadParams(body);
        if (refusal !== undefined) sendJson(res, 200, refusal);
        return refusal !== undefined;
      };

      const streamable = async (req: IncomingMessage, res: ServerResponse) => {
        refuseForeignBrowser(ctx.address, req);
        const who = await authenticateMcp(ctx, req);
        const sessionId = req.headers["mcp-session-id"];
        if (typeof sessionId === "string") {
          const session = open.claim(sessionId, "streamable", who);
          const body = await postedBody(req);
          if (refuseBadParams(res, body)) return;
          detach(res, (session.transport as StreamableHTTPServerTransport).handleRequest(req, res, body));
          return;
        }
        if (req.method !== "POST") {
          throw new AcpError(
            "InvalidRequest",
            "no Mcp-Session-Id header: POST an initialize request to open a session",
          );
        }
        open.assertRoom(who.caller.record.agentId);
        const body = await postedBody(req);
        if (refuseBadParams(res, body)) return;
        const state: SessionCaller = { ...who };
        const { server, subscriptions } = serverFor(state);
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: randomUUID,
          keepAliveMs,
          onsessioninitialized: (id) =>
            open.add({
              id,
              kind: "streamable",
              agentId: who.caller.record.agentId,
              state,
              transport,
              server,
              subscriptions,
            }),
        });
        // Set before connect: the SDK chains its own close handling after it.
        transport.onclose = () => {
          if (transport.sessionId !== undefined) void open.close(transport.sessionId, "closed by the client");
        };
        countTraffic(transport, () => transport.sessionId);
        await server.connect(transport);
        detach(
          res,
          transport.handleRequest(req, res, body).then(async () => {
            // Anything but a valid initialize was answered with an error and opened no session.
            if (transport.sessionId === undefined || !open.has(transport.sessionId)) {
              subscriptions.close();
              await server.close();
            }
          }),
        );
      };
      router.add("POST", MCP_PATH, streamable);
      router.add("GET", MCP_PATH, streamable);
      router.add("DELETE", MCP_PATH, streamable);

      router.add("GET", LEGACY_SSE_PATH, async (req, res) => {
        refuseForeignBrowser(ctx.address, req);
        const who = await authenticateMcp(ctx, req);
        open.assertRoom(who.caller.record.agentId);
        const state: SessionCaller = { ...who };
        const id = randomUUID();
        const { server, subscriptions } = serverFor(state);
        const transport = new LegacySseTransport(id, `${LEGACY_POST_PATH}/${id}`, res, keepAliveMs);
        transport.onclose = () => void open.close(id, "stream closed");
        countTraffic(transport, () => id);
        res.setTimeout(0);
        open.add({
          id,
          kind: "sse",
          agentId: who.caller.record.agentId,
          state,
          transport,
          server,
          subscriptions,
        });
        await server.connect(transport).catch(async (err: unknown) => {
          await open.close(id, "could not start");
          throw err;
        });
      });
      router.add("POST", `${LEGACY_POST_PATH}/:session_id`, async (req, res, params) => {
        refuseForeignBrowser(ctx.address, req);
        const who = await authenticateMcp(ctx, req);
        const session = open.claim(params.session_id ?? "", "sse", who);
        await (session.transport as LegacySseTransport).handlePost(req, res, ctx.maxEnvelopeBytes);
      });

      publishRoutes(router, ctx);
      noOAuthRoutes(router, MCP_PATH);
      return {
        async close() {
          await open.closeAll();
          await runs.close();
        },
      };
    },
    stats() {
      const stats = sessions?.stats() ?? { sessions: 0, idleTimers: 0, subscriptions: 0, streamTimers: 0 };
      return { ...stats, runs: bridge?.activeRuns ?? 0 };
    },
  };
}
