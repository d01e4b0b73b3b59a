import type { Command } from "commander";

type Register = (program: Command) => void;

/**
 * Every CLI command group, one line each, in the order `acp --help` lists them, with the top-level
 * commands it defines. A group's module (and the library it pulls in: the SDK, SQLite, NATS, the MCP
 * and A2A SDKs) is imported only when one of its commands runs. (`acp --version`, `acp session log`
 * and `acp session update` usually do not come here at all: ../fast-path.ts runs them without
 * commander.) Commands are thin: they parse options and call the library.
 */
const GROUPS: readonly { commands: readonly string[]; load: () => Promise<Register> }[] = [
  { commands: ["keygen"], load: async () => (await import("./keys.js")).registerKeys },
  {
    commands: ["validate", "sign", "verify"],
    load: async () => (await import("./messages.js")).registerMessages,
  },
  { commands: ["gateway"], load: async () => (await import("./gateway.js")).registerGateway },
  { commands: ["agent"], load: async () => (await import("./agent.js")).registerAgent },
  { commands: ["send", "inbox", "status"], load: async () => (await import("./send.js")).registerSend },
  { commands: ["demo"], load: async () => (await import("./demo.js")).registerDemo },
  { commands: ["audit"], load: async () => (await import("./audit.js")).registerAudit },
  { commands: ["mcp"], load: async () => (await import("./mcp.js")).registerMcp },
  { commands: ["session"], load: async () => (await import("./session.js")).registerSession },
  { commands: ["command"], load: async () => (await import("./command.js")).registerCommand },
  { commands: ["approvals"], load: async () => (await import("./approvals.js")).registerApprovals },
  { commands: ["principal"], load: async () => (await import("./principal.js")).registerPrincipal },
  { commands: ["federation"], load: async () => (await import("./federation.js")).registerFederation },
  { commands: ["negotiate"], load: async () => (await import("./negotiate.js")).registerNegotiate },
  { commands: ["agreement"], load: async () => (await import("./agreement.js")).registerAgreement },
  { commands: ["handoff"], load: async () => (await import("./handoff.js")).registerHandoff },
  { commands: ["team"], load: async () => (await import("./team.js")).registerTeam },
  { commands: ["vote"], load: async () => (await import("./vote.js")).registerVote },
  { commands: ["knowledge"], load: async () => (await import("./knowledge.js")).registerKnowledge },
];

/** The top-level command names, for tests that check every command is reachable. */
export const COMMAND_NAMES: readonly string[] = GROUPS.flatMap((group) => group.commands);

/**
 * Registers what `args` (argv without node and the script) needs: only the group of the command
 * named (also after `help`); nothing for a bare `--version`; every group when the command line
 * names none or an unknown one, so help lists them all and a typo gets a suggestion.
 */
export async function registerCommands(program: Command, args: readonly string[]): Promise<void> {
  const operands = args.filter((arg) => !arg.startsWith("-"));
  const named = operands[0] === "help" ? operands[1] : operands[0];
  const group = GROUPS.find((g) => named !== undefined && g.commands.includes(named));
  if (group) return (await group.load())(program);
  if (named === undefined && args.some((arg) => arg === "-V" || arg === "--version")) return;
  for (const register of await Promise.all(GROUPS.map((g) => g.load()))) register(program);
}
