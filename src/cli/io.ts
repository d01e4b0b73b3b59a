import { readFile } from "node:fs/promises";

/**
 * What every command prints and reads, and how a failure ends it. No commander here: the fast path
 * (fast-path.ts) prints through these without loading it.
 */

/** An expected failure: printed as `acp: <message>` with the given exit code, no stack trace. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
    /** Text to print on stdout before exiting (e.g. a JSON-RPC error object for `--json` consumers). */
    readonly stdout?: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** Reads a file argument, or standard input when the argument is `-` or absent. */
export async function readInput(file: string | undefined): Promise<{ text: string; name: string }> {
  if (file === undefined || file === "-") {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return { text: Buffer.concat(chunks).toString("utf8"), name: "<stdin>" };
  }
  try {
    return { text: await readFile(file, "utf8"), name: file };
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

/** Parses JSON text, naming the source and position on failure. */
export function parseJsonInput(text: string, name: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${name}: not valid JSON (${(err as Error).message})`);
  }
}

/** Ends a command that failed: a CliError with its message, stdout and exit code, anything else with its message and 1; never a stack trace. */
export function reportFailure(err: unknown): void {
  if (err instanceof CliError) {
    if (err.message) process.stderr.write(`acp: ${err.message}\n`);
    if (err.stdout !== undefined) process.stdout.write(err.stdout);
    process.exitCode = err.exitCode;
    return;
  }
  process.stderr.write(`acp: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printLine(text = ""): void {
  process.stdout.write(`${text}\n`);
}

/** The status a shell reports for a command killed by SIGPIPE (128 + 13), as `git log | head` or `ls | head` end. */
export const CLOSED_OUTPUT_EXIT_CODE = 141;

/**
 * A reader that stops early (`acp … | head -1`) ends the command quietly, the way it ends git or
 * ls: no more output, no stack trace, status 141. Node ignores SIGPIPE and reports a closed pipe as
 * an EPIPE error on the stream, which would otherwise crash with a stack trace.
 */
export function endQuietlyWhenOutputCloses(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE") process.exit(CLOSED_OUTPUT_EXIT_CODE);
      throw err;
    });
  }
}
