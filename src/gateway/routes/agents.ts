import { type Router, readJsonBody, sendJson } from "../../http/server.js";
import { AcpError, addressOf, isRemoteRef, localPartOf, problemsOf } from "../../protocol/index.js";
import {
  type AgentView,
  PresenceUpdateRequest,
  presenceUpdateOf,
  presenceView,
  type RegisterAgentResponse,
} from "../../wire/agents.js";
import { RotateSigningKeyRequest } from "../../wire/api.js";
import { withDeprecatedNames } from "../../wire/deprecated-names.js";
import { COMPATIBLE_MAJORS_BACK, DEFAULT_SUNSET_DAYS } from "../../wire/versions.js";
import { announceDeprecation, authenticate, type GatewayContext, requireAdmin } from "../context.js";
import type { AgentRecord } from "../registry.js";

/** What the registry shows of an agent (never its API key's hash): REST and in-process agents alike. */
export async function agentViewOf(ctx: GatewayContext, record: AgentRecord): Promise<AgentView> {
  const domain = ctx.registry.remote?.domain;
  return {
    agent_id: record.agentId,
    ...(domain !== undefined && { address: addressOf(record.agentId, domain) }),
    principal_id: record.principalId,
    signing: record.signing,
    ...(record.encryption && { encryption: record.encryption }),
    ...(record.keyHistory && { key_history: record.keyHistory }),
    capabilities: record.capabilities,
    protocol_versions: record.protocolVersions,
    created_at: record.createdAt,
    ...(record.revokedAt && { revoked_at: record.revokedAt }),
    ...(record.custodial && { custodial: true as const }),
    presence: presenceView(await ctx.presence.get(record.agentId)),
  };
}

/** The answer of a registration or a key rotation: the API key, shown once. */
function apiKeyAnswer(issued: { agentId: string; apiKey: string; custodial?: true }): RegisterAgentResponse {
  return {
    agent_id: issued.agentId,
    api_key: issued.apiKey,
    ...(issued.custodial && { custodial: true as const }),
  };
}

/**
 * An agent by id, or by address: one of this gateway's domain is the local agent, one of another
 * domain is what that agent's home gateway publishes (federation), else unknown.
 */
export async function viewOfRef(ctx: GatewayContext, ref: string): Promise<AgentView | undefined> {
  const remote = ctx.registry.remote;
  if (isRemoteRef(ref, remote?.domain)) return remote?.view(ref);
  const record = await ctx.registry.get(localPartOf(ref));
  return record ? agentViewOf(ctx, record) : undefined;
}

/** Registry endpoints: register/rotate/revoke with the admin token; reading with any valid key. */
export function agentRoutes(router: Router, ctx: GatewayContext): void {
  router.add("POST", "/api/v1/agents", async (req, res) => {
    await requireAdmin(ctx, req);
    const registered = await ctx.registry.register(await readJsonBody(req, 64 * 1024));
    ctx.logger.info({ agent: registered.agentId }, "agent registered");
    sendJson(res, 201, withDeprecatedNames(apiKeyAnswer(registered)));
  });

  router.add("GET", "/api/v1/agents", async (req, res) => {
    announceDeprecation(ctx, res, await authenticate(ctx, req));
    const records = await ctx.registry.list();
    const agents = await Promise.all(records.map((r) => agentViewOf(ctx, r)));
    sendJson(res, 200, withDeprecatedNames({ agents }));
  });

  // The protocol versions this gateway speaks and how they age (docs/protocol.md section 10).
  router.add("GET", "/api/v1/versions", async (req, res) => {
    announceDeprecation(ctx, res, await ctx.credentials.resolve(req, ["agent", "principal", "admin"]));
    const versions = ctx.registry.versions.view().map(({ deprecatedAt, sunsetAt, ...entry }) => ({
      ...entry,
      ...(deprecatedAt !== undefined && { deprecated_at: deprecatedAt }),
      ...(sunsetAt !== undefined && { sunset_at: sunsetAt }),
    }));
    sendJson(
      res,
      200,
      withDeprecatedNames({
        versions,
        policy: { compatible_majors_back: COMPATIBLE_MAJORS_BACK, default_sunset_days: DEFAULT_SUNSET_DAYS },
      }),
    );
  });

  router.add("GET", "/api/v1/agents/:id", async (req, res, { id }) => {
    announceDeprecation(ctx, res, await authenticate(ctx, req));
    const view = await viewOfRef(ctx, id as string);
    if (!view) throw new AcpError("NotFound", `no registered agent ${id}`);
    sendJson(res, 200, withDeprecatedNames(view));
  });

  router.add("POST", "/api/v1/agents/:id/rotate", async (req, res, { id }) => {
    const caller = await authenticate(ctx, req);
    announceDeprecation(ctx, res, caller);
    if (caller.kind === "agent" && caller.agent.record.agentId !== id) {
      throw new AcpError("Forbidden", "an agent can rotate only its own key");
    }
    const rotated = await ctx.registry.rotate(id as string);
    ctx.logger.info({ agent: id }, "api key rotated");
    sendJson(res, 200, withDeprecatedNames(apiKeyAnswer(rotated)));
  });

  router.add("POST", "/api/v1/agents/:id/keys", async (req, res, { id }) => {
    const caller = await authenticate(ctx, req);
    announceDeprecation(ctx, res, caller);
    if (caller.kind === "agent" && caller.agent.record.agentId !== id) {
      throw new AcpError("Forbidden", "an agent can rotate only its own signing key");
    }
    const parsed = RotateSigningKeyRequest.safeParse(await readJsonBody(req, 64 * 1024));
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid key rotation", { problems: problemsOf(parsed.error) });
    }
    const { signing, handover } = parsed.data;
    const record = await ctx.registry.rotateSigningKey(id as string, signing, handover);
    ctx.logger.info({ agent: id }, "signing key rotated");
    sendJson(res, 200, withDeprecatedNames(await agentViewOf(ctx, record)));
  });

  router.add("POST", "/api/v1/agents/:id/revoke", async (req, res, { id }) => {
    await requireAdmin(ctx, req);
    const revoked = await ctx.registry.revoke(id as string);
    ctx.logger.info({ agent: id }, "agent revoked");
    sendJson(res, 200, withDeprecatedNames({ agent_id: revoked.agentId, revoked_at: revoked.revokedAt }));
  });

  router.add("PUT", "/api/v1/agents/:id/presence", async (req, res, { id }) => {
    const caller = await authenticate(ctx, req);
    announceDeprecation(ctx, res, caller);
    if (caller.kind !== "agent" || caller.agent.record.agentId !== id) {
      throw new AcpError("Forbidden", "an agent can set only its own presence");
    }
    const parsed = PresenceUpdateRequest.safeParse(await readJsonBody(req, 64 * 1024));
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid presence update", {
        problems: problemsOf(parsed.error),
      });
    }
    await ctx.presence.update(id as string, presenceUpdateOf(parsed.data));
    sendJson(res, 200, withDeprecatedNames(presenceView(await ctx.presence.get(id as string))));
  });
}
