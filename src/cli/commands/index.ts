import type { Command } from "commander";
import { registerAgent } from "./agent.js";
import { registerAgreement } from "./agreement.js";
import { registerApprovals } from "./approvals.js";
import { registerAudit } from "./audit.js";
import { registerCommand } from "./command.js";
import { registerDemo } from "./demo.js";
import { registerGateway } from "./gateway.js";
import { registerHandoff } from "./handoff.js";
import { registerKeys } from "./keys.js";
import { registerKnowledge } from "./knowledge.js";
import { registerMcp } from "./mcp.js";
import { registerMessages } from "./messages.js";
import { registerNegotiate } from "./negotiate.js";
import { registerPrincipal } from "./principal.js";
import { registerSend } from "./send.js";
import { registerSession } from "./session.js";
import { registerTeam } from "./team.js";
import { registerVote } from "./vote.js";

/**
 * Every CLI command group registers itself here, one line each, so the program's shape is visible
 * in one place. Commands are thin: they parse options and call the library.
 */
export function registerCommands(program: Command): void {
  registerKeys(program);
  registerMessages(program);
  registerGateway(program);
  registerAgent(program);
  registerSend(program);
  registerDemo(program);
  registerAudit(program);
  registerMcp(program);
  registerSession(program);
  registerCommand(program);
  registerApprovals(program);
  registerPrincipal(program);
  registerNegotiate(program);
  registerAgreement(program);
  registerHandoff(program);
  registerTeam(program);
  registerVote(program);
  registerKnowledge(program);
  void program;
}
