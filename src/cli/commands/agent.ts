import type { Command } from "commander";
import { GatewayClient, GatewayUnreachableError } from "../../client/index.js";
import { A2A_CAPABILITY, a2aAgentBaseUrl } from "../../wire/a2a.js";
import type { AgentView } from "../../wire/api.js";
import { KeyFileError, readIdentityFile } from "../../identity/index.js";
import { AcpError, publicIdentity } from "../../protocol/index.js";
import { CliError, printJson, printLine } from "../io.js";
import { registerA2ACommands } from "./agent-a2a.js";

/** Where a command finds the gateway and its credentials: flags first, then the environment. */
export interface GatewayFlags {
  gateway?: string;
  key?: string;
  apiKey?: string;
  adminToken?: string;
  /** Where the agent's state is kept (`--state-dir`); default: the SDK's, `$ACP_STATE_DIR` or the user state directory. */
  stateDir?: string;
  json?: boolean;
}

export function gatewayOf(flags: GatewayFlags): string {
  const url = flags.gateway ?? process.env.ACP_GATEWAY;
  if (!url) throw new CliError("no gateway given: pass --gateway URL or set ACP_GATEWAY");
  return url;
}

export function keyFileOf(flags: GatewayFlags): string {
  const file = flags.key ?? process.env.ACP_KEY;
  if (!file) throw new CliError("no key file given: pass --key FILE or set ACP_KEY");
  return file;
}

export function apiKeyOf(flags: GatewayFlags): string {
  const key = flags.apiKey ?? process.env.ACP_API_KEY;
  if (!key) throw new CliError("no API key given: pass --api-key KEY or set ACP_API_KEY");
  return key;
}

/** The AcpAgent `state` option for `--state-dir` (absent: the SDK's default root). */
export function stateOf(flags: GatewayFlags): { state: { root: string } } | Record<string, never> {
  return flags.stateDir === undefined ? {} : { state: { root: flags.stateDir } };
}

export function adminTokenOf(flags: GatewayFlags): string {
  const token = flags.adminToken ?? process.env.ACP_ADMIN_TOKEN;
  if (!token)
    throw new CliError(
      "this needs the gateway's admin token: pass --admin-token TOKEN or set ACP_ADMIN_TOKEN",
    );
  return token;
}

/** The gateway options every networked command takes. */
export function withGatewayOptions(
  command: Command,
  credentials: ("key" | "api-key" | "admin-token")[],
): Command {
  command.option("--gateway <url>", "gateway URL (default: $ACP_GATEWAY)");
  if (credentials.includes("key"))
    command.option("--key <file>", "the agent's private key file (default: $ACP_KEY)");
  if (credentials.includes("api-key"))
    command.option("--api-key <key>", "the agent's API key (default: $ACP_API_KEY)");
  if (credentials.includes("key") && credentials.includes("api-key")) {
    command.option(
      "--state-dir <dir>",
      "where the agent keeps its handshakes and handled messages (default: $ACP_STATE_DIR, else the user state directory, ~/.local/state/acp)",
    );
  }
  if (credentials.includes("admin-token")) {
    command.option("--admin-token <token>", "the gateway's admin token (default: $ACP_ADMIN_TOKEN)");
  }
  return command.option("--json", "machine-readable output");
}

/**
 * Turns a failure into the CLI's message and exit code 1: an ACP error prints its code, reason and
 * the first problem's field; with --json its JSON-RPC error object also goes to stdout.
 */
export function failed(err: unknown, json = false): never {
  if (err instanceof CliError) throw err;
  if (err instanceof AcpError) {
    const problem = err.data.problems?.[0];
    const where = problem ? ` (${problem.path || "/"}: ${problem.message})` : "";
    throw new CliError(
      `${err.message} [${err.code} ${err.kind}]${where}`,
      1,
      json ? `${JSON.stringify(err.toJSON(), null, 2)}\n` : undefined,
    );
  }
  if (err instanceof KeyFileError || err instanceof GatewayUnreachableError) throw new CliError(err.message);
  throw err;
}

const collect = (value: string, previous: string[]) => [...previous, value];

type RegisterFlags = GatewayFlags & {
  capability: string[];
  protocolVersion: string[];
  a2a?: boolean;
  custodial?: boolean;
  agentId?: string;
  principal?: string;
};

/** A custodial registration names the agent and its principal; there is no key file to read them from. */
function custodialIdentity(flags: RegisterFlags) {
  if (flags.key !== undefined) {
    throw new CliError("--custodial registers an agent whose keys the gateway generates: leave out --key");
  }
  if (!flags.agentId || !flags.principal) {
    throw new CliError(
      "--custodial needs --agent-id ID and --principal ID (there is no key file to read them from)",
    );
  }
  return {
    principalId: flags.principal,
    request: { agentId: flags.agentId, principalId: flags.principal, custodial: true },
  };
}

async function keyFileIdentity(flags: RegisterFlags) {
  if (flags.agentId !== undefined || flags.principal !== undefined) {
    throw new CliError(
      "--agent-id and --principal go with --custodial; otherwise the key file names the agent",
    );
  }
  const identity = await readIdentityFile(keyFileOf(flags));
  return { principalId: identity.principalId, request: publicIdentity(identity) };
}

export function registerAgent(program: Command): void {
  const agent = program.command("agent").description("register and manage agents at a gateway");

  withGatewayOptions(
    agent
      .command("register")
      .description(
        "register the agent of a key file (public keys only), or with --custodial one whose keys the gateway " +
          "generates and holds; print its API key, shown once",
      ),
    ["key", "admin-token"],
  )
    .option("--capability <name>", "a capability to list in the registry (repeatable)", collect, [])
    .option("--a2a", "publish the agent to A2A clients (agent card and JSON-RPC under /a2a/<agent-id>)")
    .option(
      "--protocol-version <v>",
      "a protocol version the agent speaks (repeatable; default 1.0.0)",
      collect,
      [],
    )
    .option(
      "--custodial",
      "the gateway generates the agent's keys, keeps them encrypted and signs for it (for MCP clients that cannot sign); needs --agent-id and --principal instead of --key",
    )
    .option("--agent-id <id>", "with --custodial: the new agent's id")
    .option("--principal <id>", "with --custodial: the principal it acts for")
    .action((flags: RegisterFlags) =>
      run(flags, async () => {
        const who = flags.custodial ? custodialIdentity(flags) : await keyFileIdentity(flags);
        const client = new GatewayClient({ gateway: gatewayOf(flags), adminToken: adminTokenOf(flags) });
        const registered = await client.registerAgent({
          ...who.request,
          capabilities: flags.a2a ? [...new Set([...flags.capability, A2A_CAPABILITY])] : flags.capability,
          ...(flags.protocolVersion.length > 0 ? { protocolVersions: flags.protocolVersion } : {}),
        });
        if (flags.json) return printJson(registered);
        printLine(
          `registered ${registered.agentId} (principal ${who.principalId}) at ${client.baseUrl}` +
            (registered.custodial ? "; the gateway holds its keys and signs on its behalf" : ""),
        );
        if (flags.a2a) {
          const card = `${a2aAgentBaseUrl(client.baseUrl, registered.agentId)}/.well-known/agent-card.json`;
          printLine(`published to A2A clients: agent card at ${card}`);
        }
        printLine("API key (shown only now; keep it secret, e.g. in ACP_API_KEY):");
        printLine(registered.apiKey);
      }),
    );

  withGatewayOptions(agent.command("list").description("the registered agents and their presence"), [
    "api-key",
    "admin-token",
  ]).action((flags: GatewayFlags) =>
    run(flags, async () => {
      const agents = await readClient(flags).listAgents();
      if (flags.json) return printJson({ agents });
      if (agents.length === 0) return printLine("no agents registered");
      printLine(table([["AGENT", "PRINCIPAL", "PRESENCE", "LOAD", "CAPABILITIES"], ...agents.map(row)]));
    }),
  );

  withGatewayOptions(agent.command("show <agent-id>").description("one agent: keys, versions, presence"), [
    "api-key",
    "admin-token",
  ]).action((agentId: string, flags: GatewayFlags) =>
    run(flags, async () => {
      const view = await readClient(flags).getAgent(agentId);
      if (flags.json) return printJson(view);
      printLine(
        `${view.agentId} (principal ${view.principalId})${view.revokedAt ? ` REVOKED ${view.revokedAt}` : ""}`,
      );
      printLine(`  registered     ${view.createdAt}`);
      printLine(`  protocols      ${view.protocolVersions.join(", ")}`);
      printLine(`  capabilities   ${view.capabilities.join(", ") || "-"}`);
      printLine(
        `  signing key    ${view.signing.kid ?? view.signing.x}${view.custodial ? " (custodial: held by the gateway, which signs for the agent)" : ""}`,
      );
      printLine(`  encryption key ${view.encryption?.kid ?? view.encryption?.x ?? "-"}`);
      const p = view.presence;
      printLine(
        `  presence       ${p.state}, load ${p.load}%, ${p.activeTasks} active tasks, last seen ${p.lastSeen}`,
      );
    }),
  );

  withGatewayOptions(
    agent.command("rotate <agent-id>").description("issue a new API key (the old one stops working)"),
    ["api-key", "admin-token"],
  ).action((agentId: string, flags: GatewayFlags) =>
    run(flags, async () => {
      const rotated = await readClient(flags, "admin-first").rotateApiKey(agentId);
      if (flags.json) return printJson(rotated);
      printLine(`new API key for ${rotated.agentId} (shown only now):`);
      printLine(rotated.apiKey);
    }),
  );

  withGatewayOptions(
    agent.command("revoke <agent-id>").description("revoke an agent: its key stops working for good"),
    ["admin-token"],
  ).action((agentId: string, flags: GatewayFlags) =>
    run(flags, async () => {
      const revoked = await new GatewayClient({
        gateway: gatewayOf(flags),
        adminToken: adminTokenOf(flags),
      }).revokeAgent(agentId);
      if (flags.json) return printJson(revoked);
      printLine(`revoked ${revoked.agentId} at ${revoked.revokedAt}`);
    }),
  );
  registerA2ACommands(agent);
}

/** Reading needs any valid credential: the agent's API key, or the admin token. */
function readClient(
  flags: GatewayFlags,
  prefer: "agent-first" | "admin-first" = "agent-first",
): GatewayClient {
  const apiKey = flags.apiKey ?? process.env.ACP_API_KEY;
  const adminToken = flags.adminToken ?? process.env.ACP_ADMIN_TOKEN;
  if (!apiKey && !adminToken) {
    throw new CliError(
      "no credentials: pass --api-key (or ACP_API_KEY) or --admin-token (or ACP_ADMIN_TOKEN)",
    );
  }
  const useAdmin = adminToken !== undefined && (prefer === "admin-first" || apiKey === undefined);
  return new GatewayClient({
    gateway: gatewayOf(flags),
    ...(useAdmin ? { adminToken } : { apiKey: apiKey! }),
  });
}

async function run(flags: GatewayFlags, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    failed(err, flags.json);
  }
}

function row(view: AgentView): string[] {
  const presence = view.revokedAt ? "revoked" : view.presence.state;
  return [
    view.agentId,
    view.principalId,
    presence,
    `${view.presence.load}%`,
    view.capabilities.join(",") || "-",
  ];
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
