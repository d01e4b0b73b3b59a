/**
 * The agents an MCP client of the gateway sees: every live agent registered at the gateway (name =
 * its agent id; run = a plain `agent.request` whose body is the input and whose response body is
 * the output), plus the MCP agents agents publish with `serveMcpAgent` (name = `<agent-id>/<name>`,
 * with their JSON Schemas; run = `agent.mcp.run`, streaming). Published descriptors live in the
 * broker's KV (bucket `mcp-agents`), so every gateway on one NATS lists the same agents. When the
 * gateway federates, the agents of other domains it knows of follow (name = their address,
 * `agent-id@domain`; run = an `agent.request` across the link), and any other one can be named.
 */
import type { Broker, KvBucket } from "../../broker/index.js";
import { reachableAgent } from "../../gateway/addressing.js";
import { authenticateAgent, type GatewayContext } from "../../gateway/context.js";
import type { AgentRecord, ResolvedAgent } from "../../gateway/registry.js";
import { type Router, readJsonBody, sendJson } from "../../http/server.js";
import type { AgentRunContext, AgentSource } from "../../mcp/agent-source.js";
import { InvalidCursorError, UnknownAgentError } from "../../mcp/errors.js";
import type { JsonValue } from "../../mcp/json.js";
import { BRIDGE_PRINCIPAL, McpAgentName, PublishedAgentBody } from "../../mcp/messages.js";
import { type AgentDescriptor, type AgentPage, describeIssues } from "../../mcp/protocol.js";
import { AcpError, domainOf, localPartOf, problemsOf } from "../../protocol/index.js";
import type { McpBridge, RunTarget } from "./bridge.js";

export const MCP_AGENTS_BUCKET = "mcp-agents";
const PUBLISH_PATH = "/api/v1/mcp/agents";

/** A stored descriptor: key `<agent-id>/<name>`. */
interface PublishedAgent extends PublishedAgentBody {
  agentId: string;
  name: string;
  publishedAt: string;
}

/** Any ACP request body is a JSON object; that is all a plain agent promises. */
const ANY_OBJECT = { type: "object", description: "the body of an ACP request to this agent" };
const ANY_RESULT = { type: "object", description: "the body of the agent's ACP response" };

export function publishedAgents(broker: Broker): KvBucket<PublishedAgent> {
  return broker.kv<PublishedAgent>(MCP_AGENTS_BUCKET);
}

/** `PUT|DELETE /api/v1/mcp/agents/:name` with the agent's API key: what `serveMcpAgent` calls. */
export function publishRoutes(router: Pick<Router, "add">, ctx: GatewayContext): void {
  const bucket = publishedAgents(ctx.broker);
  router.add("PUT", `${PUBLISH_PATH}/:name`, async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const name = checkName(params.name ?? "");
    const parsed = PublishedAgentBody.safeParse(await readJsonBody(req, 256 * 1024));
    if (!parsed.success) {
      const { summary, issues } = describeIssues(parsed.error.issues);
      throw new AcpError("InvalidParams", `invalid MCP agent descriptor: ${summary}`, {
        problems: problemsOf(issues),
      });
    }
    const record: PublishedAgent = {
      ...parsed.data,
      agentId: caller.record.agentId,
      name,
      publishedAt: new Date().toISOString(),
    };
    await bucket.put(`${caller.record.agentId}/${name}`, record);
    sendJson(res, 200, { name: `${caller.record.agentId}/${name}`, ...parsed.data });
  });
  router.add("DELETE", `${PUBLISH_PATH}/:name`, async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const name = checkName(params.name ?? "");
    await bucket.delete(`${caller.record.agentId}/${name}`);
    sendJson(res, 200, { name: `${caller.record.agentId}/${name}`, withdrawn: true });
  });
}

function checkName(name: string): string {
  const parsed = McpAgentName.safeParse(name);
  if (!parsed.success) {
    const message = parsed.error.issues[0]?.message ?? "invalid";
    throw new AcpError("InvalidParams", `MCP agent name ${JSON.stringify(name)} ${message}`, {
      problems: [{ path: "/name", message }],
    });
  }
  return parsed.data;
}

/** The `AgentSource` of one MCP session: lists the gateway's agents, runs them for `caller`. */
export class GatewayAgentSource implements AgentSource {
  constructor(
    private readonly ctx: GatewayContext,
    private readonly bridge: McpBridge,
    private readonly caller: () => ResolvedAgent,
    private readonly pageSize: number,
  ) {}

  async list(cursor: string | undefined): Promise<AgentPage> {
    const all = await this.#all();
    const offset = cursor === undefined ? 0 : decodeCursor(cursor, all.length);
    const page = all.slice(offset, offset + this.pageSize);
    const next = offset + this.pageSize;
    return next < all.length ? { agents: page, nextCursor: encodeCursor(next) } : { agents: page };
  }

  async get(name: string): Promise<AgentDescriptor | undefined> {
    return (await this.#resolve(name))?.descriptor;
  }

  async run(name: string, input: JsonValue | undefined, context: AgentRunContext): Promise<JsonValue> {
    const resolved = await this.#resolve(name);
    if (!resolved) throw new UnknownAgentError(name);
    return this.bridge.run(resolved.target, input, this.caller(), context);
  }

  /**
   * Every listable agent: this gateway's, sorted by name (an agent's own entry first, then what it
   * published), then the agents of other domains it knows of, sorted by address.
   */
  async #all(): Promise<AgentDescriptor[]> {
    const [records, published] = await Promise.all([this.ctx.registry.list(), this.#published()]);
    const live = records.filter(listable).sort((a, b) => a.agentId.localeCompare(b.agentId));
    const byAgent = new Map<string, PublishedAgent[]>();
    for (const entry of published) byAgent.set(entry.agentId, [...(byAgent.get(entry.agentId) ?? []), entry]);
    const remote = (this.ctx.registry.remote?.known() ?? [])
      .filter(listable)
      .sort((a, b) => a.agentId.localeCompare(b.agentId));
    return [
      ...live.flatMap((record) => [
        plainDescriptor(record),
        ...(byAgent.get(record.agentId) ?? [])
          .sort((a, b) => a.name.localeCompare(b.name))
          .map(publishedDescriptor),
      ]),
      ...remote.map(plainDescriptor),
    ];
  }

  async #published(): Promise<PublishedAgent[]> {
    const bucket = publishedAgents(this.ctx.broker);
    const entries = await Promise.all((await bucket.keys()).map((key) => bucket.get(key)));
    return entries.flatMap((entry) => (entry ? [entry.value] : []));
  }

  async #resolve(name: string): Promise<{ descriptor: AgentDescriptor; target: RunTarget } | undefined> {
    const slash = name.indexOf("/");
    const agentId = slash === -1 ? name : name.slice(0, slash);
    const resolved = await reachableAgent(agentId, this.ctx.registry).catch(() => undefined);
    if (!resolved || !listable(resolved.record)) return undefined;
    if (slash === -1) {
      return { descriptor: plainDescriptor(resolved.record), target: { agentId, mcpName: name } };
    }
    const served = name.slice(slash + 1);
    if (!McpAgentName.safeParse(served).success) return undefined;
    const entry = await publishedAgents(this.ctx.broker).get(`${agentId}/${served}`);
    if (!entry) return undefined;
    return { descriptor: publishedDescriptor(entry.value), target: { agentId, served, mcpName: name } };
  }
}

/**
 * Agents that can be run: live, not a bridge (this gateway's, or another domain's, whose principal
 * is qualified with its domain), and not custodial (nobody is there to answer).
 */
function listable(record: AgentRecord): boolean {
  return (
    record.revokedAt === undefined &&
    localPartOf(record.principalId) !== BRIDGE_PRINCIPAL &&
    !record.custodial
  );
}

function plainDescriptor(record: AgentRecord): AgentDescriptor {
  const capabilities =
    record.capabilities.length > 0 ? `; capabilities: ${record.capabilities.join(", ")}` : "";
  const domain = domainOf(record.agentId);
  const of = domain === undefined ? "" : ` of ${domain}`;
  return {
    name: record.agentId,
    description: `ACP agent${of} acting for ${record.principalId}${capabilities} (input: an agent.request body)`,
    inputSchema: ANY_OBJECT,
    outputSchema: ANY_RESULT,
  };
}

function publishedDescriptor(entry: PublishedAgent): AgentDescriptor {
  return {
    name: `${entry.agentId}/${entry.name}`,
    ...(entry.description !== undefined && { description: entry.description }),
    inputSchema: entry.inputSchema,
    outputSchema: entry.outputSchema,
  };
}

// Cursors carry the offset of the next page (the list is re-read per page, as agents come and go).
function encodeCursor(offset: number): string {
  return Buffer.from(JSON.stringify({ offset })).toString("base64url");
}

function decodeCursor(cursor: string, total: number): number {
  try {
    const offset = (JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { offset?: unknown })
      .offset;
    if (typeof offset === "number" && Number.isInteger(offset) && offset > 0 && offset < total) return offset;
  } catch {
    // falls through to the error below
  }
  throw new InvalidCursorError(cursor);
}
