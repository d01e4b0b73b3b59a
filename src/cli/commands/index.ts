import type { Command } from "commander";
import { registerAudit } from "./audit.js";
import { registerGateway } from "./gateway.js";
import { registerKeys } from "./keys.js";
import { registerMcp } from "./mcp.js";
import { registerMessages } from "./messages.js";
import { registerSession } from "./session.js";

/**
 * Every CLI command group registers itself here, one line each, so the program's shape is visible
 * in one place. Commands are thin: they parse options and call the library.
 */
export function registerCommands(program: Command): void {
  registerKeys(program);
  registerMessages(program);
  registerGateway(program);
  registerAudit(program);
  registerMcp(program);
  registerSession(program);
  void program;
}
