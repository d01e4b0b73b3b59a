/**
 * The agents as MCP tools, for hosts that show a model only tools, resources and prompts (Claude
 * Desktop, Claude Code, Cursor, VS Code): `list_agents` is `agents/list`, and `ask_agent` runs an
 * agent through `agents/run`'s own path (the same resolution, input checks, errors and deltas).
 *
 * A run's deltas reach a caller that gave `_meta.progressToken` as standard
 * `notifications/progress`, each `message` one delta as JSON text, in order and before the result:
 * folded with `combineDelta` they give exactly the output. Failures are tool errors (`isError`,
 * naming what to correct), as MCP asks of tools, so the model sees them.
 */
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { AgentSource } from "./agent-source.js";
import { UnknownAgentError } from "./errors.js";
import type { JsonValue } from "./json.js";
import type { AgentDescriptor } from "./protocol.js";
import { type AgentRunEvent, handleAgentsList, handleAgentsRun } from "./server.js";

export const AgentToolNames = { list: "list_agents", ask: "ask_agent" } as const;

const Descriptor = z.looseObject({
  name: z.string(),
  description: z.string().optional(),
  inputSchema: z.record(z.string(), z.unknown()),
  outputSchema: z.record(z.string(), z.unknown()).optional(),
});

export interface AgentToolsOptions {
  onRunEvent?: (event: AgentRunEvent) => void;
}

/** Adds `list_agents` and `ask_agent` over `agents` to `server` (an `AgentsMcpServer` passes its own). */
export function addAgentTools(server: McpServer, agents: AgentSource, options: AgentToolsOptions = {}): void {
  server.registerTool(
    AgentToolNames.list,
    {
      title: "List agents",
      description:
        "List the agents you can ask for help with ask_agent: each one's name, what it does, and the " +
        "JSON Schema of the input it takes. Pass nextCursor back as cursor for the next page. Give a " +
        "name to describe that one agent only (an agent of another organization, agent-id@domain, " +
        "is looked up at its own gateway).",
      inputSchema: {
        cursor: z.string().optional().describe("nextCursor from the previous page"),
        name: z.string().min(1).optional().describe("one agent's name, or an address agent-id@domain"),
      },
      outputSchema: { agents: z.array(Descriptor), nextCursor: z.string().optional() },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ cursor, name }) => {
      try {
        const page =
          name === undefined
            ? await handleAgentsList(agents, cursor === undefined ? {} : { cursor })
            : await describeOne(agents, name);
        return {
          content: [{ type: "text", text: JSON.stringify(page, null, 2) }],
          structuredContent: { ...page },
        };
      } catch (err) {
        return failure(err);
      }
    },
  );

  server.registerTool(
    AgentToolNames.ask,
    {
      title: "Ask an agent",
      description:
        "Send an agent (a name from list_agents) its input and wait for its output. The input must " +
        'follow the agent\'s inputSchema; a string given for an object input is sent as {"text": string}. ' +
        "With a progress token, what the agent streams arrives as progress notifications.",
      inputSchema: {
        name: z.string().min(1).describe("the agent's name, as list_agents gives it"),
        input: z.json().optional().describe("the agent's input, following its inputSchema"),
      },
      outputSchema: { output: z.json() },
      annotations: { openWorldHint: true },
    },
    async ({ name, input }, extra) => {
      try {
        const descriptor = await agents.get(name);
        const given = input as JsonValue | undefined;
        const objectInput = descriptor?.inputSchema.type === "object";
        const sent = typeof given === "string" && objectInput ? { text: given } : given;
        const progressToken = extra._meta?.progressToken;
        const { output } = await handleAgentsRun(
          agents,
          { name, ...(sent !== undefined && { input: sent }) },
          {
            signal: extra.signal,
            ...(progressToken !== undefined && { progressToken }),
            notify: (notification) => extra.sendNotification(notification as unknown as ServerNotification),
            deltasAs: "progress",
            ...(options.onRunEvent !== undefined && { onRunEvent: options.onRunEvent }),
          },
        );
        return {
          content: [
            { type: "text", text: typeof output === "string" ? output : JSON.stringify(output, null, 2) },
          ],
          structuredContent: { output },
        };
      } catch (err) {
        return failure(err);
      }
    },
  );
}

/** The page `list_agents` answers for one named agent: it alone, or UnknownAgentError. */
async function describeOne(agents: AgentSource, name: string): Promise<{ agents: AgentDescriptor[] }> {
  const descriptor = await agents.get(name);
  if (!descriptor) throw new UnknownAgentError(name);
  return { agents: [descriptor] };
}

/** A tool error the model can act on: the agents capability's own message (unknown agent, bad input…). */
function failure(err: unknown): CallToolResult {
  const message = err instanceof Error ? err.message : String(err);
  const hint = err instanceof UnknownAgentError ? `; ${AgentToolNames.list} names the agents here` : "";
  return { isError: true, content: [{ type: "text", text: `${message}${hint}` }] };
}
