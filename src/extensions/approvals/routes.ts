import { acceptingDeprecatedNames, restRecord } from "../../wire/deprecated-names.js";
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { type ApprovalRecord, ApprovalStatus, type ApprovalStore } from "../../orchestration/approvals.js";
import { AgentCommand } from "../../orchestration/schemas.js";
import { AcpError, AgentId, problemsOf } from "../../protocol/index.js";
import { authenticate, type GatewayContext } from "../../gateway/context.js";
import type { Caller } from "../../gateway/credentials.js";
import { type Router, readBody, readJsonBody, sendJson } from "../../http/server.js";

export type ApprovalAction = "create" | "list" | "read" | "decide" | "cancel";

/**
 * Who may do what with an approval: the one seam the dashboard widens (principal tokens deciding
 * their own principal's approvals). Today: the admin token does everything but create; an agent
 * creates approvals for its own commands, and reads, lists and cancels its own.
 */
export type ApprovalAuthorizer = (
  caller: Caller,
  action: ApprovalAction,
  approval?: ApprovalRecord,
) => boolean;

export const defaultApprovalAuthorizer: ApprovalAuthorizer = (caller, action, approval) => {
  if (caller.kind === "admin") return action !== "create";
  if (caller.kind !== "agent") return false;
  if (action === "create" || action === "list") return true;
  if (action === "decide") return false;
  return approval !== undefined && approval.requestedBy === caller.agent.record.agentId;
};

/** POST /api/v1/approvals; `timeoutMs` is the deprecated name of `timeout_ms`. */
const CreateApproval = acceptingDeprecatedNames(
  z.strictObject({
    command: AgentCommand,
    fallbacks: z.array(AgentId).default([]),
    reason: z.string().min(1).max(500),
    timeout_ms: z
      .int()
      .min(1000, "must be at least 1000")
      .max(7 * 24 * 3_600_000, "must be at most 7 days"),
  }),
);
const Decision = z.strictObject({
  by: z.string().min(1).max(256).optional(),
  note: z.string().max(2000).optional(),
});
const MAX_WAIT_SECONDS = 30;

/** A decision's body, checked by `schema`; it is optional: nothing (or an empty body) means no note. */
export async function decisionBody<T extends z.ZodType>(
  req: IncomingMessage,
  schema: T,
): Promise<z.output<T>> {
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
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw invalid("invalid decision", parsed.error);
  return parsed.data;
}

function invalid(message: string, error: z.ZodError): AcpError {
  return new AcpError("InvalidParams", message, {
    problems: problemsOf(error),
  });
}

/**
 * `/api/v1/approvals`: the command layer's human approvals, kept in the broker's KV (bucket
 * `approvals`), so they survive a gateway restart and are shared across gateways on one NATS.
 */
export function approvalRoutes(
  router: Router,
  ctx: GatewayContext,
  store: ApprovalStore,
  authorize: ApprovalAuthorizer = defaultApprovalAuthorizer,
): { endLongPolls(): void } {
  // Long polls in progress; a shutting-down gateway ends them at once so it need not wait them out.
  const longPolls = new Set<AbortController>();
  let shuttingDown = false;
  const check = (caller: Caller, action: ApprovalAction, approval?: ApprovalRecord) => {
    if (authorize(caller, action, approval)) return;
    // A record the caller may not even read looks missing: no probing of ids.
    if (approval && !authorize(caller, "read", approval))
      throw new AcpError("NotFound", `no approval ${approval.id}`);
    throw new AcpError("Forbidden", `not allowed to ${action} approvals with these credentials`);
  };
  const existing = async (id: string) => {
    const record = await store.get(id);
    if (!record) throw new AcpError("NotFound", `no approval ${id}`);
    return record;
  };

  router.add("POST", "/api/v1/approvals", async (req, res) => {
    const caller = await authenticate(ctx, req);
    check(caller, "create");
    if (caller.kind !== "agent") throw new AcpError("Forbidden", "approvals are requested by agents");
    const parsed = CreateApproval.safeParse(await readJsonBody(req, ctx.maxEnvelopeBytes));
    if (!parsed.success) throw invalid("invalid approval request", parsed.error);
    const agent = caller.agent.record;
    if (parsed.data.command.from !== agent.agentId) {
      throw new AcpError(
        "Forbidden",
        `command.from is ${parsed.data.command.from}, not the calling agent ${agent.agentId}`,
      );
    }
    const { timeout_ms: timeoutMs, ...request } = parsed.data;
    const record = await store.create({
      ...request,
      timeoutMs,
      requestedBy: agent.agentId,
      principal: agent.principalId,
    });
    ctx.metrics.count("acp_approvals_requested_total");
    ctx.logger.info(
      { approval: record.id, agent: agent.agentId, action: record.command.action },
      "approval requested",
    );
    sendJson(res, 201, restRecord(record));
  });

  router.add("GET", "/api/v1/approvals", async (req, res, _params, url) => {
    const caller = await authenticate(ctx, req);
    check(caller, "list");
    const status = url.searchParams.get("status") ?? undefined;
    const parsedStatus = ApprovalStatus.optional().safeParse(status);
    if (!parsedStatus.success) throw invalid("invalid query parameters", parsedStatus.error);
    const requestedBy = url.searchParams.get("requested_by") ?? undefined;
    const records = await store.list({
      ...(parsedStatus.data ? { status: parsedStatus.data } : {}),
      ...(requestedBy ? { requestedBy } : {}),
    });
    sendJson(
      res,
      200,
      restRecord({ approvals: records.filter((record) => authorize(caller, "read", record)) }),
    );
  });

  router.add("GET", "/api/v1/approvals/:id", async (req, res, { id }, url) => {
    const caller = await authenticate(ctx, req);
    let record = await existing(id as string);
    check(caller, "read", record);
    const wait = Number(url.searchParams.get("wait") ?? "0");
    if (!Number.isFinite(wait) || wait < 0) {
      throw new AcpError("InvalidParams", "wait must be a number of seconds", {
        problems: [{ path: "wait", message: "must be ≥ 0" }],
      });
    }
    if (record.status === "pending" && wait > 0 && !shuttingDown) {
      // Long poll: answer as soon as it is decided (or expires), at the latest after `wait` seconds.
      const controller = new AbortController();
      longPolls.add(controller);
      const timer = setTimeout(
        () => controller.abort(new Error("long poll ended")),
        Math.min(wait, MAX_WAIT_SECONDS) * 1000,
      );
      req.once("close", () => controller.abort(new Error("client went away")));
      try {
        record = await store.waitForDecision(record.id, controller.signal);
      } catch {
        record = await existing(record.id);
      } finally {
        clearTimeout(timer);
        longPolls.delete(controller);
      }
    }
    sendJson(res, 200, restRecord(record));
  });

  const decide = (path: string, decision: "approved" | "denied" | "cancelled", action: ApprovalAction) => {
    router.add("POST", `/api/v1/approvals/:id/${path}`, async (req, res, { id }) => {
      const caller = await authenticate(ctx, req);
      const record = await existing(id as string);
      check(caller, action, record);
      const body = await decisionBody(req, Decision);
      const by = caller.kind === "agent" ? caller.agent.record.agentId : (body.by ?? "admin");
      const decided = await store.decide(record.id, {
        decision,
        by,
        ...(body.note !== undefined ? { note: body.note } : {}),
      });
      ctx.metrics.count("acp_approvals_decided_total", { decision });
      ctx.logger.info({ approval: decided.id, decision, by }, "approval decided");
      sendJson(res, 200, restRecord(decided));
    });
  };
  decide("approve", "approved", "decide");
  decide("deny", "denied", "decide");
  decide("cancel", "cancelled", "cancel");
  return {
    endLongPolls: () => {
      shuttingDown = true;
      for (const controller of longPolls) controller.abort(new Error("the gateway is shutting down"));
    },
  };
}
