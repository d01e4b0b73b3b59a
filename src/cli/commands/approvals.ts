import { userInfo } from "node:os";
import type { Command } from "commander";
import {
  type ApprovalRecord,
  ApprovalStatus,
  type ApprovalStore,
  HttpApprovalStore,
  PrincipalApprovalClient,
  SqliteApprovalStore,
} from "../../orchestration/index.js";
import { CliError, printJson, printLine } from "../io.js";
import { failed } from "../shared.js";

interface ApprovalFlags {
  gateway?: string;
  adminToken?: string;
  principalToken?: string;
  store?: string;
  json?: boolean;
}

/** What `acp approvals` does with approvals: every store, and a principal's view at a gateway. */
type ApprovalDesk = Pick<ApprovalStore, "get" | "list" | "decide" | "close">;

/** An environment variable, unset when empty. */
const env = (name: string) => process.env[name] || undefined;

/**
 * Where approvals live: a gateway (a principal token: the principal's own; or the admin token: all)
 * or a local SQLite file, never both. A flag beats an environment variable of the other kind.
 */
function deskOf(flags: ApprovalFlags): { desk: ApprovalDesk; where: string; principal: boolean } {
  const file = flags.store ?? env("ACP_APPROVALS_STORE");
  const gateway = flags.gateway ?? (file === undefined ? env("ACP_GATEWAY") : undefined);
  if (file !== undefined && gateway !== undefined)
    throw new CliError("give either --gateway or --store, not both");
  if (file !== undefined) return { desk: SqliteApprovalStore.open(file), where: file, principal: false };
  if (gateway === undefined) {
    throw new CliError(
      "no approvals given: pass --gateway URL with --principal-token or --admin-token (or ACP_GATEWAY with ACP_PRINCIPAL_TOKEN or ACP_ADMIN_TOKEN), or --store FILE",
    );
  }
  if (flags.principalToken !== undefined && flags.adminToken !== undefined)
    throw new CliError("give either --principal-token or --admin-token, not both");
  const principalToken =
    flags.principalToken ?? (flags.adminToken === undefined ? env("ACP_PRINCIPAL_TOKEN") : undefined);
  if (principalToken) {
    const desk = new PrincipalApprovalClient({ gateway, principalToken });
    return { desk, where: gateway, principal: true };
  }
  const token = flags.adminToken ?? env("ACP_ADMIN_TOKEN");
  if (!token)
    throw new CliError(
      "deciding approvals at a gateway needs a principal token (--principal-token TOKEN or ACP_PRINCIPAL_TOKEN) or its admin token (--admin-token TOKEN or ACP_ADMIN_TOKEN)",
    );
  return { desk: new HttpApprovalStore({ gateway, credential: token }), where: gateway, principal: false };
}

function withSource(command: Command): Command {
  return command
    .option("--gateway <url>", "the gateway keeping the approvals (default: $ACP_GATEWAY)")
    .option(
      "--principal-token <token>",
      "a principal's token: its own approvals and its agents' (default: $ACP_PRINCIPAL_TOKEN)",
    )
    .option("--admin-token <token>", "the gateway's admin token: all approvals (default: $ACP_ADMIN_TOKEN)")
    .option(
      "--store <file>",
      "a local approvals file of a standalone orchestrator (default: $ACP_APPROVALS_STORE)",
    )
    .option("--json", "machine-readable output");
}

async function using(
  flags: ApprovalFlags,
  body: (desk: ApprovalDesk, where: string, principal: boolean) => Promise<void>,
): Promise<void> {
  const { desk, where, principal } = deskOf(flags);
  try {
    await body(desk, where, principal);
  } catch (err) {
    failed(err, flags.json);
  } finally {
    await desk.close();
  }
}

const age = (iso: string) => {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return seconds < 120
    ? `${seconds}s`
    : seconds < 7200
      ? `${Math.round(seconds / 60)}m`
      : `${Math.round(seconds / 3600)}h`;
};

function describe(record: ApprovalRecord): string[] {
  const c = record.command;
  const params = JSON.stringify(c.parameters);
  return [
    `${record.id}  ${record.status}  ${c.action} → ${c.to}  priority ${c.priority}  asked by ${record.requestedBy}${record.principal ? ` for ${record.principal}` : ""}, ${age(record.createdAt)} ago`,
    `  why: ${record.reason}`,
    `  parameters: ${params.length > 200 ? `${params.slice(0, 199)}…` : params}`,
    ...(record.fallbacks.length > 0 ? [`  fallbacks: ${record.fallbacks.join(", ")}`] : []),
    record.status === "pending"
      ? `  expires: ${record.expiresAt}`
      : `  ${record.status} by ${record.decidedBy ?? "?"} at ${record.decidedAt ?? "?"}${record.note ? `: ${record.note}` : ""}`,
  ];
}

export function registerApprovals(program: Command): void {
  const group = program
    .command("approvals")
    .description(
      "human approval of commands: list the pending ones, approve or deny them (at a gateway, or in a local store)",
    );

  withSource(group.command("list").description("pending approvals, oldest first"))
    .option("--all", "also approvals already decided, expired or cancelled (kept 7 days)")
    .option("--status <status>", `only this status: ${ApprovalStatus.options.join(", ")}`)
    .action((flags: ApprovalFlags & { all?: boolean; status?: string }) =>
      using(flags, async (desk, where) => {
        const status = flags.status ?? (flags.all ? undefined : "pending");
        const parsed = ApprovalStatus.optional().safeParse(status);
        if (!parsed.success)
          throw new CliError(`--status must be one of ${ApprovalStatus.options.join(", ")}`);
        const records = await desk.list(parsed.data ? { status: parsed.data } : {});
        if (flags.json) return printJson({ approvals: records });
        if (records.length === 0)
          return printLine(`no ${status ?? ""} approvals at ${where}`.replace("  ", " "));
        for (const record of records) for (const line of describe(record)) printLine(line);
      }),
    );

  withSource(group.command("show <id>").description("one approval with its command")).action(
    (id: string, flags: ApprovalFlags) =>
      using(flags, async (desk) => {
        const record = await desk.get(id);
        if (!record) throw new CliError(`no approval ${id}`);
        if (flags.json) return printJson(record);
        for (const line of describe(record)) printLine(line);
      }),
  );

  for (const [verb, decision] of [
    ["approve", "approved"],
    ["deny", "denied"],
  ] as const) {
    withSource(
      group
        .command(`${verb} <id>`)
        .description(
          verb === "approve"
            ? "approve a pending command: it is sent now"
            : "deny a pending command: it fails with your reason",
        ),
    )
      .option("--by <name>", "who decides, with the admin token or a local store (default: your user name)")
      .option(
        verb === "approve" ? "--note <text>" : "--reason <text>",
        verb === "approve" ? "a note kept with the decision" : "why, shown to the requester",
      )
      .action((id: string, flags: ApprovalFlags & { by?: string; note?: string; reason?: string }) =>
        using(flags, async (desk, _where, principal) => {
          if (principal && flags.by !== undefined) {
            throw new CliError(
              "--by is not taken with a principal token: the gateway records the decision as the token's principal",
            );
          }
          const note = flags.note ?? flags.reason;
          const decided = await desk.decide(id, {
            decision,
            by: flags.by ?? userInfo().username,
            ...(note !== undefined ? { note } : {}),
          });
          if (flags.json) return printJson(decided);
          printLine(`${decided.id}: ${decided.status} (${decided.command.action} → ${decided.command.to})`);
        }),
      );
  }
}
