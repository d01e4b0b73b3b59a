/**
 * The calls agents make hundreds of times, run without commander: `acp --version`, `acp session
 * log` and `acp session update`. Loading and evaluating commander is a good part of what a bare
 * command costs to start, and these commands need none of it: their arguments and options are tables
 * (leaf-spec.ts) that commander registers too, read here by a parser that takes only a command line
 * commander would read the same way. Anything else (help, an unknown option, a value outside its
 * choices, a missing argument) goes to the full CLI, so its help and errors stay commander's own.
 */
import { printLine, reportFailure } from "./io.js";
import { parseLeaf } from "./leaf-spec.js";
import { packageVersion } from "./version.js";

/** Runs the command `argv` names if it is one of these and reads plainly; false when it is not (nothing done). */
export async function runFastPath(argv: readonly string[]): Promise<boolean> {
  const args = argv.slice(2);
  if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
    printLine(packageVersion());
    return true;
  }
  if (args[0] !== "session" || (args[1] !== "log" && args[1] !== "update")) return false;
  const { SESSION_LOG, SESSION_UPDATE } = await import("./commands/session-log-update.js");
  const spec = args[1] === "log" ? SESSION_LOG : SESSION_UPDATE;
  const parsed = parseLeaf(spec, args.slice(2));
  if (parsed === undefined) return false;
  try {
    await spec.run(parsed.operands, parsed.options);
  } catch (err) {
    reportFailure(err);
  }
  return true;
}
