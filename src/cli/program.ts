import { Command, CommanderError } from "commander";
import { registerCommands } from "./commands/index.js";
import { CliError } from "./io.js";

export function buildProgram(): Command {
  const program = new Command("acp")
    .description(
      "ACP, the Agent Communication Protocol toolkit: signed agent-to-agent messages, a gateway, and tools",
    )
    .version(process.env.npm_package_version ?? "0.1.0")
    .showHelpAfterError()
    .exitOverride();
  registerCommands(program);
  return program;
}

/** Parses argv and runs the command; maps CliError to its exit code and message, never a stack trace. */
export async function runCli(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    if (err instanceof CliError) {
      if (err.message) process.stderr.write(`acp: ${err.message}\n`);
      if (err.stdout !== undefined) process.stdout.write(err.stdout);
      process.exitCode = err.exitCode;
      return;
    }
    process.stderr.write(`acp: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
