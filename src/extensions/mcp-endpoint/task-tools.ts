/**
 * The task tools (the ACP messaging platform's submit_hiring_result, add_hiring_message,
 * report_hiring_failure, named for ACP, plus accept/decline because an ACP handoff is accepted before it is
 * worked on).
 *
 * Each changes a handoff, which the collaboration module accepts only as an ACP message signed by
 * the agent itself. The gateway has no agent's private key, so it asks the MCP client to sign:
 * an `acp/sign` request on the same session (clients that hold the key declare
 * `capabilities.experimental.acpSigning`; `acp mcp serve --gateway … --key-file` does). The signed
 * message then goes to the collaboration extension's handoff service as the caller, with the
 * same checks as if the agent had posted it to `/api/v1/handoffs/{id}/{step}`. An agent registered as
 * custodial has no key outside the gateway: the gateway signs for it with the key it holds
 * (src/extensions/custody), and the audit says so.
 */
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { HandoffView } from "../../collab/handoff.js";
import {
  ACP_SIGN_METHOD,
  ACP_SIGNING_CAPABILITY,
  type AcpSignParams,
  AcpSignResult,
} from "../../mcp/messages.js";
import { signForGateway } from "../../mcp/proxy-signing.js";
import { negotiateVersion } from "../../wire/versions.js";
import { isNotFound, type TaskSession } from "./tasks.js";

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const TaskId = z.string().min(1).describe("the task's id (from tasks://pending)");

interface Action {
  /** The handoff step (the collaboration endpoint /api/v1/handoffs/{id}/{step}). */
  path: "accept" | "decline" | "complete" | "fail" | "progress";
  method: AcpSignParams["method"];
  done: string;
}

export function addTaskTools(server: McpServer, session: TaskSession): void {
  const act = async (
    extra: Extra,
    taskId: string,
    action: Action,
    body: (task: HandoffView) => Record<string, unknown>,
  ): Promise<CallToolResult> => {
    try {
      const task = await session.tasks.read(session.caller(), taskId);
      const me = session.caller().record;
      const to = task.delegator === me.agentId ? task.delegate : task.delegator;
      const clientSigns = server.server.getClientCapabilities()?.experimental?.[ACP_SIGNING_CAPABILITY];
      if (!me.custodial && !clientSigns) {
        return failure(
          `${action.method} must be signed with ${me.agentId}'s key, and this MCP client cannot sign: ` +
            "connect through `acp mcp serve --gateway URL --api-key KEY --key-file AGENT.json`, " +
            `or declare capabilities.experimental.${ACP_SIGNING_CAPABILITY} and answer ${ACP_SIGN_METHOD}, ` +
            "or register the agent with `acp agent register --custodial` so the gateway signs for it (docs/mcp.md)",
        );
      }
      const peer = await session.ctx.registry.get(to);
      const { versions } = session.ctx.registry;
      const trustLayerVersion =
        peer &&
        negotiateVersion(versions.usable(me.protocolVersions), versions.usable(peer.protocolVersions));
      if (!trustLayerVersion) return failure(`${me.agentId} and ${to} share no protocol version`);
      const params: AcpSignParams = {
        method: action.method,
        to,
        body: { handoffId: task.handoffId, ...body(task) } as AcpSignParams["body"],
        trustLayerVersion,
        purpose: `${action.method} for task ${task.handoffId}${task.title ? ` (${task.title})` : ""} to ${to}`,
      };
      const { message } = me.custodial
        ? await signInCustody(session, me.agentId, params)
        : await extra.sendRequest(
            { method: ACP_SIGN_METHOD, params } as unknown as ServerRequest,
            AcpSignResult,
          );
      const updated = await session.tasks.apply(session.caller(), task.handoffId, action.path, message);
      return {
        content: [
          { type: "text", text: `Task ${updated.handoffId} ${action.done}; it is now ${updated.status}.` },
          { type: "text", text: JSON.stringify(updated, null, 2) },
        ],
      };
    } catch (err) {
      if (isNotFound(err)) return failure(`no task ${taskId} involving ${session.caller().record.agentId}`);
      return failure((err as Error).message);
    }
  };

  server.registerTool(
    "accept_task",
    {
      description: "Accept a task offered to you (tasks://pending lists them)",
      inputSchema: { taskId: TaskId },
    },
    ({ taskId }, extra) =>
      act(extra, taskId, { path: "accept", method: "agent.handoff.accept", done: "accepted" }, () => ({})),
  );
  server.registerTool(
    "decline_task",
    {
      description: "Decline a task offered to you, optionally saying why",
      inputSchema: { taskId: TaskId, reason: z.string().min(1).max(2000).optional() },
    },
    ({ taskId, reason }, extra) =>
      act(extra, taskId, { path: "decline", method: "agent.handoff.decline", done: "declined" }, () =>
        reason === undefined ? {} : { reason },
      ),
  );
  server.registerTool(
    "submit_task_result",
    {
      description: "Submit the result of a task you accepted; this completes it",
      inputSchema: { taskId: TaskId, result: z.json().describe("the task's output (any JSON)") },
    },
    ({ taskId, result }, extra) =>
      act(extra, taskId, { path: "complete", method: "agent.handoff.complete", done: "completed" }, () => ({
        result,
      })),
  );
  server.registerTool(
    "add_task_message",
    {
      description: "Send the delegator a message about a task you accepted, with how far along it is",
      inputSchema: {
        taskId: TaskId,
        text: z.string().min(1).max(500),
        progress: z.number().min(0).max(100).optional().describe("percent done (default: unchanged)"),
      },
    },
    ({ taskId, text, progress }, extra) =>
      act(
        extra,
        taskId,
        { path: "progress", method: "agent.handoff.progress", done: "got your message" },
        (task) => ({
          progress: progress ?? task.progress?.percent ?? 0,
          note: text,
        }),
      ),
  );
  server.registerTool(
    "report_task_failure",
    {
      description: "Mark a task you accepted as failed, saying why",
      inputSchema: { taskId: TaskId, reason: z.string().min(1).max(2000) },
    },
    ({ taskId, reason }, extra) =>
      act(extra, taskId, { path: "fail", method: "agent.handoff.fail", done: "failed" }, () => ({ reason })),
  );
}

/** A custodial agent's message, signed by the gateway with the key it holds for the agent. */
async function signInCustody(session: TaskSession, agentId: string, params: AcpSignParams) {
  const custodian = session.ctx.registry.custodian;
  if (!custodian) throw new Error(`${agentId} is custodial, but this gateway has custody turned off`);
  return signForGateway(await custodian.identity(agentId), params);
}

function failure(text: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text }] };
}
