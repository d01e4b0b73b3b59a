import { Command, CommanderError } from "commander";
import { registerCommands } from "./commands/index.js";
import { reportFailure } from "./io.js";
import { packageVersion } from "./version.js";

/** The program with the commands `argv` needs registered (see registerCommands). */
export async function buildProgram(argv: readonly string[]): Promise<Command> {
  const program = new Command("acp")
    .description(
      "ACP, the Agent Communication Protocol toolkit: signed agent-to-agent messages, a gateway, and tools",
    )
    .version(packageVersion())
    .showHelpAfterError()
    .exitOverride();
  await registerCommands(program, argv.slice(2));
  return program;
}

/** Parses argv and runs the command; a failure ends it as `reportFailure` says. */
export async function runCli(argv: string[]): Promise<void> {
  const program = await buildProgram(argv);
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    reportFailure(err);
  }
}
