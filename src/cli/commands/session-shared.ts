import { type Command, Option } from "commander";
import { SEVERITIES } from "../../coordination/vocabulary.js";

export interface Common {
  root?: string;
  session?: string;
  json?: boolean;
}

/** --root, --session and --json on every command, so they can be given after the command name. */
export function leaf(
  parent: Command,
  name: string,
  description: string,
  sessionHelp = "session id (default: $ACP_SESSION_ID, else $CLAUDE_SESSION_ID)",
): Command {
  return parent
    .command(name)
    .description(description)
    .option("--root <dir>", "context root (default: $ACP_CONTEXT_DIR, else .claude/agents/context)")
    .option("--session <id>", sessionHelp)
    .option("--json", "machine-readable output");
}

/** The session the options name; the coordination library is loaded here, when a command runs. */
export async function open(o: Common) {
  const { Session } = await import("../../coordination/session.js");
  return Session.fromEnvironment({ root: o.root, session: o.session });
}

/** The whole coordination library, for the commands that are not on an agent's hot path. */
export const coordination = () => import("../../coordination/index.js");
export const severityOption = () =>
  new Option("--severity <level>", "only findings of this severity").choices(SEVERITIES);
export const suffixOption = () =>
  new Option("--suffix <text>", "only agents whose name ends with this (e.g. analyzer)");
