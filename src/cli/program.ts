import { existsSync, readFileSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { registerCommands } from "./commands/index.js";
import { CliError } from "./io.js";

/**
 * The installed package's version: the nearest package.json above this module. That is two levels
 * up from src/cli and dist/cli, three from the benchmarks' build (.bench-build/src/cli).
 */
function packageVersion(): string {
  for (let dir = new URL("../", import.meta.url); ; dir = new URL("../", dir)) {
    const file = new URL("package.json", dir);
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
    if (dir.pathname === "/") throw new Error(`no package.json above ${import.meta.url}`);
  }
}

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

/** Parses argv and runs the command; maps CliError to its exit code and message, never a stack trace. */
export async function runCli(argv: string[]): Promise<void> {
  const program = await buildProgram(argv);
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
