/**
 * A2A clients calling ACP agents: the gateway-facing glue (the only file that knows the gateway's
 * extension interface). For every registered agent with the capability `a2a`:
 * - `GET /a2a/{agentId}/.well-known/agent-card.json`: its A2A agent card (public, like any card);
 * - `POST /a2a/{agentId}`: A2A JSON-RPC (1.0 methods, and 0.3's `message/send`… through the SDK's
 *   compatibility layer), authenticated with a gateway API key (X-API-Key or Bearer).
 * Streams (SendStreamingMessage, SubscribeToTask) are Server-Sent Events (write-answer.ts), served
 * without holding the gateway's request slot so that shutdown does not wait for them.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { TLSSocket } from "node:tls";
import { TaskState } from "@a2a-js/sdk";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { JsonRpcTransportHandler, ServerCallContext } from "@a2a-js/sdk/server";
import { isRemoteAddress, reachableAgent } from "../../../gateway/addressing.js";
import { authenticate, type GatewayContext } from "../../../gateway/context.js";
import type { GatewayExtension } from "../../../gateway/extension.js";
import type { SecretKeeper } from "../../../gateway/secrets.js";
import { type Router, readJsonBody, sendError, sendJson } from "../../../http/server.js";
import { AcpError, AgentId } from "../../../protocol/index.js";
import { A2A_BASE_PATH } from "../../../wire/a2a.js";
import {
  type A2ACall,
  A2AErrorCode,
  A2ARpcError,
  checkA2ACall,
  askedA2AVersion,
  isLegacyMethod,
  requestedA2AVersion,
  versionNotSupported,
} from "../json-rpc.js";
import { CallerAgents } from "./caller-agents.js";
import { AGENT_CARD_PATH, cardAnswer, isPublished } from "./card.js";
import { A2ACaller } from "./durable-stores.js";
import { A2AAcpMethods, statusEvent } from "./executor.js";
import { AgentEndpoints } from "./agent-endpoints.js";
import { refusePushUrls } from "./push-urls.js";
import { writeAnswer } from "./write-answer.js";

export interface A2AInboundOptions {
  /** Where bridge identities persist (`<data>/a2a-bridge/`); omitted: memory only. */
  dataDir?: string;
  /**
   * Seals the bridge identities kept under `dataDir` (required with it; `secretKeeper()` of
   * acp-kit/server) and the tokens and credentials of push notification configs.
   */
  secrets?: SecretKeeper;
  /** Audit log root of the bridge agents; omitted: none (the relay's audit still records every message). */
  auditRoot?: string;
  /** Longest an A2A task waits for the ACP agent's answer, an offline agent's included. Default 1 hour. */
  requestTimeoutMs?: number;
  /** Timeout of one push notification POST. Default 5 s. Push URLs follow the gateway's outbound URL policy (`allowPrivateUrls`). */
  pushTimeoutMs?: number;
  /**
   * A published agent whose card is also served at the origin's `/.well-known/agent-card.json`,
   * where A2A clients that are given only the gateway's address look (`acp gateway
   * --a2a-well-known`). Default: none, and that path answers 404.
   */
  wellKnownAgent?: string;
}

export interface A2AInboundExtension extends GatewayExtension {
  /** Requests being answered (blocking sends, streams) and tasks waiting for their ACP agent. */
  stats(): { answering: number; tasks: number };
}

/** @deprecated The acronym is spelled `A2A` throughout: use `A2AInboundOptions`. */
export type A2aInboundOptions = A2AInboundOptions;
/** @deprecated The acronym is spelled `A2A` throughout: use `A2AInboundExtension`. */
export type A2aInboundExtension = A2AInboundExtension;

/**
 * Lets A2A clients call the gateway's agents that have the capability `a2a`: their agent cards and A2A
 * JSON-RPC (streams as Server-Sent Events) under `/a2a/{agentId}`, carried to the agent as ACP requests.
 */
export function a2aInboundExtension(options: A2AInboundOptions = {}): A2AInboundExtension {
  if (options.wellKnownAgent !== undefined && !AgentId.safeParse(options.wellKnownAgent).success) {
    throw new Error(`wellKnownAgent: ${JSON.stringify(options.wellKnownAgent)} is not a valid agent id`);
  }
  /** Open answers and the JSON-RPC id each is for. */
  const answering = new Map<ServerResponse, A2ACall["id"]>();
  let endpoints: AgentEndpoints | undefined;
  let bridge: CallerAgents | undefined;
  const close = async () => {
    for (const [res, id] of answering) {
      if (!res.headersSent) {
        sendJson(res, 200, {
          jsonrpc: "2.0",
          id,
          error: {
            code: A2AErrorCode.InternalError,
            message: "the gateway is shutting down; ask again later",
          },
        });
      } else res.end();
    }
    answering.clear();
    endpoints?.close();
    await bridge?.close();
  };

  return {
    name: "a2a-inbound",
    mount(ctx: GatewayContext, router: Router) {
      const progress = (body: Record<string, unknown>, context: { from: string; method: string }) => {
        if (context.method !== A2AAcpMethods.progress || typeof body.taskId !== "string") return;
        const task = endpoints?.running.get(body.taskId);
        // Progress counts only from the agent the task went to.
        if (task?.target !== context.from || typeof body.text !== "string") return;
        task.emit(statusWorking(body.taskId, task.contextId, body.text));
      };
      bridge = new CallerAgents(ctx, {
        ...(options.dataDir !== undefined && { dataDir: options.dataDir }),
        ...(options.secrets !== undefined && { secrets: options.secrets }),
        ...(options.auditRoot !== undefined && { auditRoot: options.auditRoot }),
        requestTimeoutMs: options.requestTimeoutMs ?? 3_600_000,
        onNotification: progress,
        onResponse: (message, caller) =>
          void endpoints?.lateAnswers
            .onResponse(message, caller)
            .catch((err: unknown) =>
              ctx.logger.warn({ err: (err as Error).message }, "A2A: applying a late answer failed"),
            ),
      });
      const open = new AgentEndpoints(ctx, {
        bridge,
        publicUrl: () => ctx.address.publicUrl ?? "http://127.0.0.1",
        requestTimeoutMs: options.requestTimeoutMs ?? 3_600_000,
        pushTimeoutMs: options.pushTimeoutMs ?? 5_000,
        ...(options.secrets !== undefined && { secrets: options.secrets }),
      });
      endpoints = open;

      // An agent here opts in with the capability `a2a`; an agent of a peer domain is reached as any
      // ACP agent of this gateway can reach it (federation), by its address.
      const publishedAgent = async (agentId: string) => {
        if (isRemoteAddress(agentId, ctx.registry)) {
          const remote = await reachableAgent(agentId, ctx.registry);
          if (remote) return remote.record;
          throw new AcpError("NotFound", `no agent ${agentId} is reachable from this gateway`, {
            problems: [{ path: "/agentId", message: "not an agent of a peer domain" }],
          });
        }
        const agent = await ctx.registry.resolve(agentId);
        if (!agent || !isPublished(agent.record)) {
          throw new AcpError("NotFound", `no agent ${agentId} is published for A2A at this gateway`, {
            problems: [{ path: "/agentId", message: "not registered with the capability a2a" }],
          });
        }
        return agent.record;
      };

      const serveCard = async (req: IncomingMessage, res: ServerResponse, url: URL, agentId: string) => {
        const record = await publishedAgent(agentId);
        const asked = askedA2AVersion(req.headers["a2a-version"], url);
        // The gateway's own URL, never the request's Host (which a shared cache would then serve to
        // everyone); bound to every address without a public URL, the Host, and nothing cached.
        const configured = ctx.address.publicUrl;
        const { status, body, headers } = cardAnswer(record, configured ?? hostUrlOf(req), asked);
        sendJson(
          res,
          status,
          body,
          configured ? headers : { ...headers, vary: `${headers.vary}, Host`, "cache-control": "no-store" },
        );
      };
      router.add("GET", `${A2A_BASE_PATH}/:agent_id${AGENT_CARD_PATH}`, (req, res, params, url) =>
        serveCard(req, res, url, params.agent_id ?? ""),
      );
      // The origin's card, for clients given only the gateway's address: the operator's choice.
      const { wellKnownAgent } = options;
      if (wellKnownAgent !== undefined)
        router.add("GET", AGENT_CARD_PATH, (req, res, _params, url) =>
          serveCard(req, res, url, wellKnownAgent),
        );

      router.add("POST", `${A2A_BASE_PATH}/:agent_id`, async (req, res, params, url) => {
        const caller = await authenticate(ctx, req);
        const record = await publishedAgent(params.agent_id ?? "");
        // Answers to requests sent before a restart come to bridge agents, connected from here on.
        void open.lateAnswers.resume();
        const body = await readJsonBody(req, ctx.maxEnvelopeBytes);
        let call: A2ACall;
        try {
          call = checkA2ACall(body);
          const asked = askedA2AVersion(req.headers["a2a-version"], url);
          if (requestedA2AVersion(asked) === undefined) throw versionNotSupported(asked, call.id);
          await refusePushUrls(call, ctx.outbound);
        } catch (err) {
          if (!(err instanceof A2ARpcError)) throw err;
          sendJson(res, 200, { jsonrpc: "2.0", id: err.requestId, error: err.toJSON() });
          return;
        }
        const legacy = isLegacyMethod(call.method);
        const context = new ServerCallContext({
          user: A2ACaller.of(caller),
          // Push notifications are shaped for the version the task was created with.
          requestedVersion: legacy ? "0.3" : "1.0",
        });
        const endpoint = open.for(record);
        // One message per task: its answer is the ACP agent's one answer to one request.
        const continued = continuedTaskOf(call);
        if (continued !== undefined && (await endpoint.unfinished(continued, context))) {
          const busy = new A2ARpcError(
            A2AErrorCode.UnsupportedOperation,
            `task ${continued} is still waiting for ${record.agentId}'s answer to an earlier message: a task ` +
              "here takes one message; follow it (GetTask, SubscribeToTask, a push notification), cancel it, " +
              "or send this message without taskId to start a new task",
            [{ field: "params.message.taskId", description: "names a task that is still working" }],
          );
          sendJson(res, 200, { jsonrpc: "2.0", id: call.id, error: busy.toJSON() });
          return;
        }
        const transport = legacy ? endpoint.legacy : endpoint.transport;
        // Answered without holding the gateway's request slot: a blocking SendMessage may wait long
        // for its agent and a stream lasts, and shutdown must not wait for them (close() ends them).
        res.setTimeout(0);
        answering.set(res, call.id);
        // An answer under way (a stream, a blocking call) ends when the caller's key is rotated or
        // its agent revoked, as a new request with that key would be refused.
        const releaseKey =
          caller.kind === "agent"
            ? ctx.openedByKey.track(caller.agent, (why) => {
                if (res.headersSent) res.end();
                else sendError(res, new AcpError("Unauthorized", `${why} after this call began`));
              })
            : () => undefined;
        res.on("close", () => {
          releaseKey();
          answering.delete(res);
        });
        const mapError = (err: unknown) =>
          legacy
            ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(err)
            : JsonRpcTransportHandler.mapToJSONRPCError(err);
        void writeAnswer(
          res,
          call.id,
          mapError,
          transport.handle(body as Record<string, unknown>, context),
        ).catch((err: unknown) => {
          ctx.logger.warn({ err: (err as Error).message, method: call.method }, "A2A request failed");
          if (!res.headersSent) sendJson(res, 200, { jsonrpc: "2.0", id: call.id, error: mapError(err) });
          else res.end();
        });
      });
      return { close };
    },
    stats() {
      return { answering: answering.size, tasks: endpoints?.activeTasks ?? 0 };
    },
  };
}

function statusWorking(taskId: string, contextId: string, text: string) {
  return statusEvent(taskId, contextId, TaskState.TASK_STATE_WORKING, text);
}

/** The task a message names (`params.message.taskId`, 1.0 and 0.3 alike), if the call sends one. */
function continuedTaskOf(call: A2ACall): string | undefined {
  const message = call.params?.message as { taskId?: unknown } | undefined;
  return typeof message?.taskId === "string" && message.taskId !== "" ? message.taskId : undefined;
}

function hostUrlOf(req: IncomingMessage): string {
  const scheme = req.socket instanceof TLSSocket ? "https" : "http";
  const local = req.socket.localAddress ?? "127.0.0.1";
  const host = req.headers.host ?? `${local.includes(":") ? `[${local}]` : local}:${req.socket.localPort}`;
  return `${scheme}://${host}`;
}
