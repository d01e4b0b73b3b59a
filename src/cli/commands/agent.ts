import type { Command } from "commander";
import { GatewayClient } from "../../client/index.js";
import { readIdentityFile } from "../../identity/index.js";
import { publicIdentity } from "../../protocol/index.js";
import { A2A_CAPABILITY, a2aAgentBaseUrl } from "../../wire/a2a.js";
import { type AgentView, registrationOf } from "../../wire/agents.js";
import { CliError, printJson, printLine } from "../io.js";
import {
  adminTokenOf,
  type GatewayFlags,
  gatewayOf,
  guarded,
  keyFileOf,
  withGatewayOptions,
} from "../shared.js";
import { registerA2ACommands } from "./agent-a2a.js";

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
    request: { agent_id: flags.agentId, principal_id: flags.principal, custodial: true },
  };
}

async function keyFileIdentity(flags: RegisterFlags) {
  if (flags.agentId !== undefined || flags.principal !== undefined) {
    throw new CliError(
      "--agent-id and --principal go with --custodial; otherwise the key file names the agent",
    );
  }
  const identity = await readIdentityFile(keyFileOf(flags));
  return { principalId: identity.principalId, request: registrationOf(publicIdentity(identity)) };
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
      guarded(flags, async () => {
        const who = flags.custodial ? custodialIdentity(flags) : await keyFileIdentity(flags);
        const client = new GatewayClient({ gateway: gatewayOf(flags), adminToken: adminTokenOf(flags) });
        const registered = await client.registerAgent({
          ...who.request,
          capabilities: flags.a2a ? [...new Set([...flags.capability, A2A_CAPABILITY])] : flags.capability,
          ...(flags.protocolVersion.length > 0 ? { protocol_versions: flags.protocolVersion } : {}),
        });
        if (flags.json) return printJson(registered);
        printLine(
          `registered ${registered.agent_id} (principal ${who.principalId}) at ${client.baseUrl}` +
            (registered.custodial ? "; the gateway holds its keys and signs on its behalf" : ""),
        );
        if (flags.a2a) {
          const card = `${a2aAgentBaseUrl(client.baseUrl, registered.agent_id)}/.well-known/agent-card.json`;
          printLine(`published to A2A clients: agent card at ${card}`);
        }
        printLine("API key (shown only now; keep it secret, e.g. in ACP_API_KEY):");
        printLine(registered.api_key);
      }),
    );

  withGatewayOptions(agent.command("list").description("the registered agents and their presence"), [
    "api-key",
    "admin-token",
  ]).action((flags: GatewayFlags) =>
    guarded(flags, async () => {
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
    guarded(flags, async () => {
      const view = await readClient(flags).getAgent(agentId);
      if (flags.json) return printJson(view);
      printLine(
        `${view.agent_id} (principal ${view.principal_id})${view.revoked_at ? ` REVOKED ${view.revoked_at}` : ""}`,
      );
      printLine(`  registered     ${view.created_at}`);
      printLine(`  protocols      ${view.protocol_versions.join(", ")}`);
      printLine(`  capabilities   ${view.capabilities.join(", ") || "-"}`);
      printLine(
        `  signing key    ${view.signing.kid ?? view.signing.x}${view.custodial ? " (custodial: held by the gateway, which signs for the agent)" : ""}`,
      );
      printLine(`  encryption key ${view.encryption?.kid ?? view.encryption?.x ?? "-"}`);
      const p = view.presence;
      printLine(
        `  presence       ${p.state}, load ${p.load}%, ${p.active_tasks} active tasks, last seen ${p.last_seen}`,
      );
    }),
  );

  withGatewayOptions(
    agent.command("rotate <agent-id>").description("issue a new API key (the old one stops working)"),
    ["api-key", "admin-token"],
  ).action((agentId: string, flags: GatewayFlags) =>
    guarded(flags, async () => {
      const rotated = await readClient(flags, "admin-first").rotateApiKey(agentId);
      if (flags.json) return printJson(rotated);
      printLine(`new API key for ${rotated.agent_id} (shown only now):`);
      printLine(rotated.api_key);
    }),
  );

  withGatewayOptions(
    agent.command("revoke <agent-id>").description("revoke an agent: its key stops working for good"),
    ["admin-token"],
  ).action((agentId: string, flags: GatewayFlags) =>
    guarded(flags, async () => {
      const revoked = await new GatewayClient({
        gateway: gatewayOf(flags),
        adminToken: adminTokenOf(flags),
      }).revokeAgent(agentId);
      if (flags.json) return printJson(revoked);
      printLine(`revoked ${revoked.agent_id} at ${revoked.revoked_at}`);
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

function row(view: AgentView): string[] {
  const presence = view.revoked_at ? "revoked" : view.presence.state;
  return [
    view.agent_id,
    view.principal_id,
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
