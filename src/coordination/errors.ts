/** Why a coordination operation failed; the CLI maps each kind to a message and an exit code. */
export type CoordinationErrorKind =
  | "invalid" // a file or an input does not match its format
  | "not_found" // a session, agent, report or artifact does not exist
  | "exists" // creating something that is already there
  | "lock_timeout" // coordination.json stayed locked by a live owner past the wait limit
  | "lock_lost" // our lock was broken by another process while we held it
  | "torn"; // an append could not be written as one whole line

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
