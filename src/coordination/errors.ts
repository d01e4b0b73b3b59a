/** Why a coordination operation failed; the CLI maps each kind to a message and an exit code. */
export type CoordinationErrorKind =
  | "invalid" // a file or an input does not match its format
  | "not_found" // a session, agent, report or artifact does not exist
  | "exists" // creating something that is already there
  | "lock_timeout" // coordination.json stayed locked by a live owner past the wait limit
  | "lock_lost" // our lock was broken by another process while we held it
  | "torn" // an append could not be written as one whole line
  | "unsafe"; // a link, a special file, or a path leading outside the session directory

/** Where in which file a problem is: every message names the file, and the line and field when known. */
export interface ErrorLocation {
  file?: string;
  line?: number;
  field?: string;
}

/** One thing wrong with an input, located. */
export interface LocatedProblem extends ErrorLocation {
  detail: string;
}

/**
 * What the coordination module throws for bad input or a missing file: `kind` says which (`invalid`,
 * `not_found`, …), and `file`, `line` and `field` locate it, so the CLI can name them.
 */
export class CoordinationError extends Error {
  readonly file: string | undefined;
  readonly line: number | undefined;
  readonly field: string | undefined;
  /** Everything wrong with the input, the first (the one the message names) included. */
  readonly problems: LocatedProblem[];

  constructor(
    readonly kind: CoordinationErrorKind,
    readonly detail: string,
    location: ErrorLocation = {},
    problems?: LocatedProblem[],
  ) {
    super(formatLocated(detail, location));
    this.name = "CoordinationError";
    this.file = location.file;
    this.line = location.line;
    this.field = location.field;
    this.problems = problems ?? [{ ...location, detail }];
  }
}

/** `file:line: field: detail`, leaving out the parts that are unknown. */
export function formatLocated(detail: string, { file, line, field }: ErrorLocation): string {
  let prefix = "";
  if (file !== undefined) prefix += line !== undefined ? `${file}:${line}: ` : `${file}: `;
  if (field !== undefined && field !== "") prefix += `${field}: `;
  return prefix + detail;
}

/**
 * A failure as a remote caller (an MCP client, the dashboard) may see it: the file relative to the
 * session directory and a generic reason. Never the file's content (a JSON parse error quotes it),
 * its size or a server path: those stay in the full message, for the local CLI, whose user owns
 * the files.
 */
export interface PublicProblem {
  /** Relative to the session directory (`reports/x.json`); absent when not known. */
  file?: string;
  /** A line of messages.jsonl. */
  line?: number;
  reason: string;
}

const PUBLIC_REASONS: Record<CoordinationErrorKind, string> = {
  invalid: "is not valid JSON or does not match its format",
  not_found: "is missing",
  exists: "already exists",
  lock_timeout: "is locked",
  lock_lost: "is locked",
  torn: "has a torn line",
  unsafe: "is not a regular file inside the session directory",
};

export function publicProblem(err: unknown, sessionDir: string): PublicProblem {
  const path =
    err instanceof CoordinationError ? err.file : ((err as NodeJS.ErrnoException | null)?.path ?? undefined);
  const inside = path === undefined ? undefined : relativeInside(sessionDir, path);
  return {
    ...(inside !== undefined && { file: inside }),
    reason: err instanceof CoordinationError ? PUBLIC_REASONS[err.kind] : "cannot be read",
  };
}

/** `file: reason`, or the reason alone. */
export function formatPublicProblem(problem: PublicProblem): string {
  return problem.file === undefined ? problem.reason : `${problem.file}: ${problem.reason}`;
}

function relativeInside(dir: string, path: string): string | undefined {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  return path.startsWith(prefix) ? path.slice(prefix.length) : undefined;
}
