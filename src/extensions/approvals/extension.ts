import type { GatewayContext } from "../../gateway/context.js";
import type { GatewayExtension } from "../../gateway/extension.js";
import type { Router } from "../../http/server.js";
import type { DashboardWatch } from "../../gateway/panels.js";
import { KvApprovalStore } from "../../orchestration/approvals-kv.js";
import { approvalVisible, principalApprovalRoutes } from "./principal-routes.js";
import { type ApprovalAuthorizer, approvalRoutes } from "./routes.js";

export interface ApprovalsExtension extends GatewayExtension {
  /** The dashboard's live stream announces approval changes to whoever may see them. */
  readonly dashboardWatch: DashboardWatch;
}

/**
 * The command layer's human approvals, one store (the broker's KV bucket `approvals`) behind two
 * route sets: `/api/v1/approvals` for agents and the admin (the CLI, the orchestrator), and
 * `/api/v1/dashboard/approvals` for principals deciding on the dashboard.
 */
export function approvalsExtension(options: { authorize?: ApprovalAuthorizer } = {}): ApprovalsExtension {
  return {
    name: "approvals",
    dashboardWatch: { bucket: "approvals", what: "approvals", visible: approvalVisible },
    mount(ctx: GatewayContext, router: Router) {
      const store = new KvApprovalStore(ctx.broker);
      const { endLongPolls } = approvalRoutes(router, ctx, store, options.authorize);
      principalApprovalRoutes(router, ctx, store);
      return {
        beforeDrain: endLongPolls,
        close: () => store.close(),
      };
    },
  };
}
