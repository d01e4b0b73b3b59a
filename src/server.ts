/**
 * `acp-kit/server`: the composition root. It wires the default gateway (the core with the
 * dashboard, collaboration, the MCP endpoint, approvals, custodial keys and the A2A bridge both
 * ways) and is the only module that imports
 * the extensions (src/extensions/*); `acp gateway` and `acp demo` start the gateway through it.
 * A library user who wants another set calls `startGateway` (acp-kit/gateway) with the extensions
 * of their choice, e.g. `startGateway({ extensions: [approvalsExtension()] })`.
 */
import { join } from "node:path";
import { a2aInboundExtension } from "./extensions/a2a/inbound/extension.js";
import { a2aOutboundExtension } from "./extensions/a2a/outbound/extension.js";
import { type ApprovalsExtension, approvalsExtension } from "./extensions/approvals/extension.js";
import { type CollabExtension, collabExtension } from "./extensions/collab/extension.js";
import { custodyExtension } from "./extensions/custody/extension.js";
import { secretKeeper } from "./extensions/custody/sealing.js";
import { type DashboardOptions, dashboardExtension } from "./extensions/dashboard/extension.js";
import { federationExtension, type FederationOptions } from "./extensions/federation/extension.js";
import { mcpEndpointExtension } from "./extensions/mcp-endpoint/extension.js";
import type { GatewayExtension } from "./gateway/extension.js";
import { startGateway } from "./gateway/gateway.js";
import type { Gateway, GatewayOptions } from "./gateway/gateway-options.js";

export {
  type A2AInboundExtension,
  type A2AInboundOptions,
  type A2aInboundExtension,
  type A2aInboundOptions,
  a2aInboundExtension,
} from "./extensions/a2a/inbound/extension.js";
export {
  type A2AOutboundOptions,
  a2aOutboundExtension,
} from "./extensions/a2a/outbound/extension.js";
export { type ApprovalsExtension, approvalsExtension } from "./extensions/approvals/extension.js";
export { type ApprovalAuthorizer, defaultApprovalAuthorizer } from "./extensions/approvals/routes.js";
export { type CollabExtension, type CollabOptions, collabExtension } from "./extensions/collab/extension.js";
export type { HandoffService, HandoffStep } from "./extensions/collab/routes-handoff.js";
export { type CustodyOptions, custodyExtension } from "./extensions/custody/extension.js";
export { secretKeeper } from "./extensions/custody/sealing.js";
export { type DashboardOptions, dashboardExtension } from "./extensions/dashboard/extension.js";
export { parseWebhookTarget, type WebhookTarget } from "./extensions/dashboard/webhooks.js";
export { type FederationOptions, federationExtension } from "./extensions/federation/extension.js";
export {
  MCP_PATH,
  type McpEndpointExtension,
  type McpEndpointOptions,
  type McpEndpointStats,
  mcpEndpointExtension,
} from "./extensions/mcp-endpoint/extension.js";
export type { TaskSource } from "./extensions/mcp-endpoint/tasks.js";

export interface DefaultGatewayOptions extends GatewayOptions {
  /**
   * Extra extensions, mounted after the dashboard. One named `collab`, `mcp`, `approvals` or
   * `a2a-inbound` replaces the default one (configured otherwise); the MCP endpoint's tasks come from whichever
   * collaboration extension is mounted.
   */
  extensions?: GatewayExtension[];
  /** Incoming webhooks (Slack/Discord-compatible; `slack:`/`discord:` prefixes) posted every relayed message's summary. */
  summaryWebhooks?: string[];
  /** Settings of the dashboard (mounted at `/` and `/api/v1/dashboard`): sessions root, web bundle, pacing. */
  dashboard?: Omit<DashboardOptions, "relayAuditRoot" | "summaryWebhooks" | "panels" | "watches">;
  /**
   * Custodial agent keys (`custodial: true` registrations; each agent opts in): on by default. The
   * key-encryption key: `key`, else `ACP_CUSTODY_KEY`, else `<data>/custody.key` (docs/gateway.md).
   */
  custody?: { enabled?: boolean; key?: string };
  /**
   * A published A2A agent (capability `a2a`) whose card is also served at the origin's
   * `/.well-known/agent-card.json`, for A2A clients given only the gateway's address. Default none: 404.
   */
  a2aWellKnownAgent?: string;
  /**
   * Federation with other organizations' gateways (docs/federation.md): off unless a domain is
   * given. The federation key lives in the data directory; arriving messages may be as old as the
   * gateway's retention.
   */
  federation?: Omit<FederationOptions, "data" | "retentionMs">;
}

/** The standard gateway: core, dashboard, collaboration, MCP endpoint, approvals, custody and the A2A bridge. */
export function startDefaultGateway(options: DefaultGatewayOptions = {}): Promise<Gateway> {
  const {
    summaryWebhooks,
    dashboard,
    custody,
    a2aWellKnownAgent,
    federation,
    extensions: extra = [],
    ...core
  } = options;
  const data = core.data ?? "./.acp";
  const audited = core.audit !== false;
  const given = (name: string) => extra.find((e) => e.name === name);
  const collab =
    (given("collab") as CollabExtension | undefined) ??
    collabExtension(audited ? { auditRoot: join(data, "collab-audit") } : {});
  if (!("handoffs" in collab)) throw new TypeError("the extension named collab must be a collabExtension()");
  const approvals = (given("approvals") as ApprovalsExtension | undefined) ?? approvalsExtension();
  const mcp =
    given("mcp") ??
    mcpEndpointExtension({
      tasks: collab.handoffs,
      ...(audited ? { auditRoot: join(data, "mcp-audit") } : {}),
      ...(dashboard?.sessionsRoot ? { coordinationRoot: dashboard.sessionsRoot } : {}),
    });
  // One key-encryption key seals every secret the gateway keeps at rest (src/gateway/secrets.ts).
  const secrets = secretKeeper({ data, ...(custody?.key !== undefined ? { key: custody.key } : {}) });
  // Publishes only agents registered with the capability `a2a`: inert until one opts in.
  const a2aInbound =
    given("a2a-inbound") ??
    a2aInboundExtension({
      dataDir: data,
      secrets,
      ...(audited ? { auditRoot: join(data, "a2a-audit") } : {}),
      ...(a2aWellKnownAgent !== undefined && { wellKnownAgent: a2aWellKnownAgent }),
    });
  // Off unless the admin gives the gateway a federation domain.
  const federated =
    given("federation") ??
    (federation
      ? federationExtension({
          ...federation,
          data,
          ...(core.retentionMs !== undefined && { retentionMs: core.retentionMs }),
        })
      : undefined);
  // Built before anything is opened: a malformed webhook URL stops start-up with nothing to clean up.
  const dashboardExt = dashboardExtension({
    ...dashboard,
    ...(audited ? { relayAuditRoot: join(data, "relay-audit") } : {}),
    summaryWebhooks: summaryWebhooks ?? [],
    panels: collab.panels,
    adminViews: federated ? ["federation"] : [],
    ...("dashboardWatch" in approvals ? { watches: [approvals.dashboardWatch] } : {}),
  });
  const custodian =
    given("custody") ??
    (custody?.enabled === false
      ? undefined
      : custodyExtension({ data, ...(custody?.key !== undefined ? { key: custody.key } : {}) }));
  // ACP agents calling A2A agents: inert until an admin registers one (docs/a2a.md).
  const a2aOutbound =
    given("a2a-outbound") ?? a2aOutboundExtension({ keyDir: join(data, "a2a-bridge"), secrets });
  const defaults = [
    collab,
    mcp,
    approvals,
    a2aInbound,
    a2aOutbound,
    ...(custodian ? [custodian] : []),
    ...(federated ? [federated] : []),
  ].filter((e) => !extra.includes(e));
  return startGateway({ ...core, extensions: [dashboardExt, ...extra, ...defaults] });
}
