/**
 * The MCP caller's tasks (the ACP messaging platform's "hirings", named for ACP): the handoffs delegated to
 * its agent through the gateway (src/collab), as resources and a system prompt.
 * - `tasks://pending`: the tasks waiting on the agent (offered: accept or decline; accepted:
 *   complete or fail), oldest first; subscribable — a new or changed handoff notifies it;
 * - `tasks://{id}`: one task with what the delegator handed over (completed, remaining, context);
 * - prompt `system-prompt`: the agent's role, its tools and resources.
 * The tools that act on tasks are in task-tools.ts.
 */
import { type McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ErrorCode, McpError, type ReadResourceResult } from "@modelcontextprotocol/sdk/types.js";
import type { Unsubscribe } from "../../broker/index.js";
import type { HandoffRecord, HandoffView } from "../../collab/handoff.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import type { ResourceSubscriptions } from "../../mcp/subscriptions.js";
import { AcpError } from "../../protocol/index.js";

/**
 * The handoffs the MCP endpoint offers as tasks: the collaboration extension's handoff service,
 * handed over by the composition root (so every rule, check and audit of the REST API applies).
 */
export interface TaskSource {
  pending(agentId: string): Promise<HandoffRecord[]>;
  watchPending(agentId: string, onChange: () => void): Promise<Unsubscribe>;
  watch(handoffId: string, onChange: () => void): Promise<Unsubscribe>;
  read(caller: ResolvedAgent, handoffId: string, withEnvelope?: boolean): Promise<HandoffView>;
  apply(
    caller: ResolvedAgent,
    handoffId: string,
    step: "accept" | "decline" | "complete" | "fail" | "progress",
    message: unknown,
  ): Promise<HandoffView>;
}

/** True for a refusal that means "no such task (for this caller)". */
export function isNotFound(err: unknown): boolean {
  return err instanceof AcpError && err.kind === "NotFound";
}

export const PENDING_TASKS_URI = "tasks://pending";
/** `tasks://<handoff id>`: the id in its delegator's namespace (`boss.<uuid>`), or one from before ids had them. */
const TASK_URI = /^tasks:\/\/((?:[A-Za-z0-9][A-Za-z0-9_-]{0,127}\.)?[A-Za-z0-9][A-Za-z0-9_-]{0,127})$/;

/** What the task resources and tools of one MCP session need. */
export interface TaskSession {
  ctx: GatewayContext;
  /** The agent the session belongs to (re-resolved on every request, so revocation shows). */
  caller(): ResolvedAgent;
  tasks: TaskSource;
}

/** A pending task as `tasks://pending` lists it. */
export function taskSummary(record: HandoffRecord) {
  return {
    id: record.handoffId,
    uri: `tasks://${record.handoffId}`,
    ...(record.title !== undefined && { title: record.title }),
    from: record.delegator,
    fromPrincipal: record.delegatorPrincipal,
    status: record.status,
    requires: record.requires,
    escrow: record.escrow,
    ...(record.progress !== undefined && { progress: record.progress.percent }),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

/** One task with its handoff body (completed / remaining / context), read as the caller. */
export async function readTask(session: TaskSession, id: string) {
  try {
    const view = await session.tasks.read(session.caller(), id, true);
    const { offer, ...rest } = view;
    const body = (offer.envelope as { params?: { body?: Record<string, unknown> } } | undefined)?.params
      ?.body;
    return { ...rest, offerMessageId: offer.messageId, ...(body !== undefined && { handoff: body }) };
  } catch (err) {
    if (isNotFound(err)) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `no task ${id} involving ${session.caller().record.agentId}`,
      );
    }
    throw err;
  }
}

export function addTaskResources(
  server: McpServer,
  subscriptions: ResourceSubscriptions,
  session: TaskSession,
): void {
  const { tasks } = session;
  const agentId = () => session.caller().record.agentId;
  const json = (uri: URL | string, value: unknown): ReadResourceResult => ({
    contents: [{ uri: String(uri), mimeType: "application/json", text: JSON.stringify(value, null, 2) }],
  });

  server.registerResource(
    "pending-tasks",
    PENDING_TASKS_URI,
    {
      description: "Tasks handed off to your agent and waiting on it (subscribe to hear of new ones)",
      mimeType: "application/json",
    },
    async (uri) =>
      json(uri, {
        agentId: agentId(),
        tasks: (await tasks.pending(agentId())).map(taskSummary),
      }),
  );
  server.registerResource(
    "task",
    new ResourceTemplate("tasks://{id}", {
      list: async () => ({
        resources: (await tasks.pending(agentId())).map((record) => ({
          uri: `tasks://${record.handoffId}`,
          name: record.title ?? `task ${record.handoffId}`,
          description: `${record.status}, from ${record.delegator}`,
          mimeType: "application/json",
        })),
      }),
    }),
    { description: "One task: its status, history and what was handed over", mimeType: "application/json" },
    async (uri, variables) => json(uri, await readTask(session, String(variables.id))),
  );

  subscriptions.add(async (uri, onUpdated) => {
    if (uri === PENDING_TASKS_URI) return tasks.watchPending(agentId(), onUpdated);
    const match = TASK_URI.exec(uri);
    if (!match) return undefined;
    const id = match[1] ?? "";
    await readTask(session, id); // refuses a task the caller is no party to
    return tasks.watch(id, onUpdated);
  });
}

export function addSystemPrompt(
  server: McpServer,
  session: TaskSession,
  extras: { agents: boolean; coordination: boolean },
): void {
  server.registerPrompt(
    "system-prompt",
    { description: "System prompt describing your agent's role and the tools and resources it has here" },
    async () => {
      const { record } = session.caller();
      const pending = await session.tasks.pending(record.agentId);
      const lines = [
        `You are the ACP agent "${record.agentId}", acting for the principal "${record.principalId}" through an ACP gateway.`,
        record.capabilities.length > 0
          ? `Your registered capabilities: ${record.capabilities.join(", ")}. Other agents hand you tasks that need them.`
          : "Other agents may hand you tasks.",
        `You have ${pending.length} pending task${pending.length === 1 ? "" : "s"}.`,
        "",
        "Resources:",
        `- ${PENDING_TASKS_URI}: the tasks waiting on you. Subscribe to it; when notified, read it again.`,
        "- tasks://{id}: one task, with what was completed, what remains and all the context the delegator gave.",
        ...(extras.coordination
          ? ["- coordination://{session} (and /events, /reports): coordination sessions you take part in."]
          : []),
        "",
        record.custodial
          ? "Tools (each change is an ACP message the gateway signs for you with the key it holds for your agent):"
          : "Tools (each change is an ACP message signed with your agent's key, which your MCP client holds):",
        "- accept_task / decline_task: take an offered task on, or refuse it with a reason.",
        "- add_task_message: tell the delegator how an accepted task is going (with a progress percentage).",
        "- submit_task_result: complete an accepted task with its result.",
        "- report_task_failure: mark an accepted task failed, saying why.",
        ...(extras.agents
          ? [
              "",
              "Agents: list_agents shows every agent at this gateway and the input each takes; ask_agent sends one",
              "an input on your behalf and returns its output (agents/list and agents/run do the same for clients",
              "that speak the MCP agents capability).",
            ]
          : []),
        "",
        "Work on one task at a time: read it, accept it, report progress, then submit the result or report the failure.",
      ];
      return { messages: [{ role: "user", content: { type: "text", text: lines.join("\n") } }] };
    },
  );
}
