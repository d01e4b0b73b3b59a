import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { type Router, readBody, sendJson } from "../../gateway/http.js";
import {
  type ApprovalRecord,
  ApprovalRecord as ApprovalRecordSchema,
  ApprovalStatus,
} from "../../orchestration/approvals.js";
import { AcpError } from "../../protocol/index.js";
import { DASHBOARD_API, type DashboardServices, scopeOf } from "./services.js";
import type { Scope } from "./viewer.js";

/**
 * The command layer's human approvals (bucket `approvals`, the same records as `/api/v1/approvals`).
 * A principal sees and decides the approvals asked of it (`principal`) or asked by one of its agents;
 * the admin sees and decides all.
 */
export function approvalVisible(scope: Scope, value: unknown): boolean {
  const parsed = ApprovalRecordSchema.safeParse(value);
  if (!parsed.success) return false;
  const record = parsed.data;
  return scope.actsFor(record.principal) || scope.ownsAgent(record.requestedBy);
}

const Decision = z.strictObject({ note: z.string().max(2000).optional() });

async function decisionBody(req: IncomingMessage): Promise<{ note?: string }> {
  const text = (await readBody(req, 64 * 1024)).toString("utf8").trim();
  let raw: unknown = {};
  if (text !== "") {
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new AcpError("ParseError", "the request body is not valid JSON", {
        problems: [{ path: "", message: (err as Error).message }],
      });
    }
  }
  const parsed = Decision.safeParse(raw);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", "invalid decision", {
      problems: parsed.error.issues.map((i) => ({ path: `/${i.path.join("/")}`, message: i.message })),
    });
  }
  return parsed.data;
}

export function approvalRoutes(router: Router, services: DashboardServices): void {
  const { approvals, ctx } = services;

  router.add("GET", `${DASHBOARD_API}/approvals`, async (req, res, _params, url) => {
    const scope = await scopeOf(services, req);
    const status = url.searchParams.get("status") || undefined;
    const parsed = ApprovalStatus.optional().safeParse(status);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid query parameters", {
        problems: [{ path: "status", message: `must be one of ${ApprovalStatus.options.join(", ")}` }],
      });
    }
    const records = await approvals.list(parsed.data ? { status: parsed.data } : {});
    sendJson(res, 200, {
      // Newest first: the pending ones people act on are usually the latest.
      approvals: records.filter((record) => approvalVisible(scope, record)).reverse(),
    });
  });

  const decide = (verb: "approve" | "deny", decision: "approved" | "denied") => {
    router.add("POST", `${DASHBOARD_API}/approvals/:id/${verb}`, async (req, res, { id }) => {
      const scope = await scopeOf(services, req);
      const record: ApprovalRecord | null = await approvals.get(id as string);
      // One the viewer may not see reads as missing: no probing of ids.
      if (!record || !approvalVisible(scope, record)) throw new AcpError("NotFound", `no approval ${id}`);
      const { note } = await decisionBody(req);
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
      sendJson(res, 200, decided);
    });
  };
  decide("approve", "approved");
  decide("deny", "denied");
}
