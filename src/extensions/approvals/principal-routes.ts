import { restRecord } from "../../wire/deprecated-names.js";
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import type { GatewayContext } from "../../gateway/context.js";
import { type Router, sendJson } from "../../http/server.js";
import type { PanelScope } from "../../gateway/panels.js";
import {
  type ApprovalRecord,
  ApprovalRecord as ApprovalRecordSchema,
  ApprovalStatus,
} from "../../orchestration/approvals.js";
import type { ApprovalStore } from "../../orchestration/approvals.js";
import { PRINCIPAL_APPROVALS_PATH } from "../../orchestration/approvals-http.js";
import { AcpError } from "../../protocol/index.js";
import { decisionBody } from "./routes.js";

/** Where the dashboard's web page and `acp approvals --principal-token` ask for a principal's approvals. */
const PRINCIPAL_API = PRINCIPAL_APPROVALS_PATH;
const Decision = z.strictObject({ note: z.string().max(2000).optional() });

type Approver = Pick<PanelScope, "actsFor" | "ownsAgent" | "actor">;

/**
 * The command layer's human approvals (bucket `approvals`, the same records as `/api/v1/approvals`).
 * A principal sees and decides the approvals asked of it (`principal`) or asked by one of its agents;
 * the admin sees and decides all.
 */
export function approvalVisible(scope: Pick<PanelScope, "actsFor" | "ownsAgent">, value: unknown): boolean {
  const parsed = ApprovalRecordSchema.safeParse(value);
  if (!parsed.success) return false;
  const record = parsed.data;
  return scope.actsFor(record.principal) || scope.ownsAgent(record.requestedBy);
}

/** A principal (its own and its agents' approvals) or the admin (all), signed in with their token. */
async function approverOf(ctx: GatewayContext, req: IncomingMessage): Promise<Approver> {
  const caller = await ctx.credentials.resolve(req, ["principal", "admin"]);
  if (caller.kind === "admin") return { actor: "admin", actsFor: () => true, ownsAgent: () => true };
  const mine = new Set(
    (await ctx.registry.list())
      .filter((record) => record.principalId === caller.principalId)
      .map((record) => record.agentId),
  );
  return {
    actor: `principal:${caller.principalId}`,
    actsFor: (principalId) => principalId === caller.principalId,
    ownsAgent: (agentId) => mine.has(agentId),
  };
}

/** The approvals people decide on the dashboard: listed and decided with a principal or admin token. */
export function principalApprovalRoutes(router: Router, ctx: GatewayContext, approvals: ApprovalStore): void {
  router.add("GET", PRINCIPAL_API, async (req, res, _params, url) => {
    const scope = await approverOf(ctx, req);
    const status = url.searchParams.get("status") || undefined;
    const parsed = ApprovalStatus.optional().safeParse(status);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid query parameters", {
        problems: [{ path: "status", message: `must be one of ${ApprovalStatus.options.join(", ")}` }],
      });
    }
    const records = await approvals.list(parsed.data ? { status: parsed.data } : {});
    sendJson(
      res,
      200,
      restRecord({
        // Newest first: the pending ones people act on are usually the latest.
        approvals: records.filter((record) => approvalVisible(scope, record)).reverse(),
      }),
    );
  });

  /** One approval the viewer may see; one it may not reads as missing (no probing of ids). */
  const visible = async (scope: Approver, id: string): Promise<ApprovalRecord> => {
    const record = await approvals.get(id);
    if (!record || !approvalVisible(scope, record)) throw new AcpError("NotFound", `no approval ${id}`);
    return record;
  };

  router.add("GET", `${PRINCIPAL_API}/:id`, async (req, res, { id }) => {
    sendJson(res, 200, restRecord(await visible(await approverOf(ctx, req), id as string)));
  });

  const decide = (verb: "approve" | "deny", decision: "approved" | "denied") => {
    router.add("POST", `${PRINCIPAL_API}/:id/${verb}`, async (req, res, { id }) => {
      const scope = await approverOf(ctx, req);
      const record = await visible(scope, id as string);
      const { note } = await decisionBody(req, Decision);
      const decided = await approvals.decide(record.id, {
        decision,
        by: scope.actor,
        ...(note !== undefined && note !== "" ? { note } : {}),
      });
      ctx.metrics.count("acp_approvals_decided_total", { decision });
      ctx.logger.info(
        { approval: decided.id, decision, by: scope.actor },
        "approval decided on the dashboard",
      );
      sendJson(res, 200, restRecord(decided));
    });
  };
  decide("approve", "approved");
  decide("deny", "denied");
}
