import type { Command } from "commander";
import { PrincipalAdminClient } from "../../client/principals.js";
import { CliError, printJson, printLine } from "../io.js";
import { failed, type GatewayFlags, gatewayOf, withGatewayOptions } from "../shared.js";

function clientOf(flags: GatewayFlags): PrincipalAdminClient {
  const adminToken = flags.adminToken ?? process.env.ACP_ADMIN_TOKEN;
  if (!adminToken) {
    throw new CliError(
      "this needs the gateway's admin token: pass --admin-token TOKEN or set ACP_ADMIN_TOKEN",
    );
  }
  return new PrincipalAdminClient({ gateway: gatewayOf(flags), adminToken });
}

/** `acp principal add|list|revoke`: dashboard sign-in tokens for human principals. */
export function registerPrincipal(program: Command): void {
  const principal = program
    .command("principal")
    .description(
      "tokens with which human principals sign in to the gateway's dashboard (admin token needed)",
    );

  withGatewayOptions(
    principal
      .command("add")
      .argument("<principal-id>", "the principal, as agents name it in their principal-id header")
      .description("issue a dashboard token for a principal: it sees its own agents and their exchanges"),
    ["admin-token"],
  ).action(async (principalId: string, flags: GatewayFlags) => {
    const added = await clientOf(flags)
      .add(principalId)
      .catch((err: unknown) => failed(err, flags.json));
    if (flags.json) {
      printJson(added);
      return;
    }
    const gateway = gatewayOf(flags).replace(/\/+$/, "");
    printLine(`principal ${added.principal_id} added`);
    printLine(`token (shown once; the gateway keeps only its hash): ${added.token}`);
    printLine(`sign in at ${gateway}/ with it`);
  });

  withGatewayOptions(
    principal.command("list").description("principals with a token, revoked ones included"),
    ["admin-token"],
  ).action(async (flags: GatewayFlags) => {
    const principals = await clientOf(flags)
      .list()
      .catch((err: unknown) => failed(err, flags.json));
    if (flags.json) {
      printJson({ principals });
      return;
    }
    if (principals.length === 0) {
      printLine("no principals yet (acp principal add PRINCIPAL_ID)");
      return;
    }
    for (const p of principals) {
      printLine(
        `${p.principal_id}\t${p.revoked_at ? `revoked ${p.revoked_at}` : `active since ${p.created_at}`}`,
      );
    }
  });

  withGatewayOptions(
    principal
      .command("revoke")
      .argument("<principal-id>")
      .description("revoke a principal's token at once (its open dashboards are signed out)"),
    ["admin-token"],
  ).action(async (principalId: string, flags: GatewayFlags) => {
    const revoked = await clientOf(flags)
      .revoke(principalId)
      .catch((err: unknown) => failed(err, flags.json));
    if (flags.json) printJson(revoked);
    else printLine(`principal ${revoked.principal_id} revoked at ${revoked.revoked_at}`);
  });
}
