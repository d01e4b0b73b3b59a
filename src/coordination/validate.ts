import { createRequire } from "node:module";
import type * as Yaml from "yaml";
import type { z } from "zod";
import { CoordinationError, type LocatedProblem } from "./errors.js";

/**
 * The YAML parser only names the line of a problem, so it is loaded when there is one, not with
 * every command that validates (it is CommonJS, so it can be loaded synchronously here).
 */
const yaml = (): typeof Yaml => createRequire(import.meta.url)("yaml") as typeof Yaml;

/** `agents.security-analyzer.status`, `findings[2].severity`: the field path as people write it. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out;
}

/**
 * The 1-based line where the value at `path` starts in a JSON or YAML text, or where its nearest
 * existing parent starts when the field itself is missing. YAML is a superset of JSON, so one
 * parser with source ranges serves both formats.
 */
export function lineOfPath(text: string, path: readonly PropertyKey[]): number | undefined {
  const { isNode, LineCounter, parseDocument } = yaml();
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, keepSourceTokens: false, uniqueKeys: false });
  if (doc.errors.length > 0) return undefined;
  for (let depth = path.length; depth >= 0; depth--) {
    const node = doc.getIn(path.slice(0, depth) as (string | number)[], true);
    if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
  }
  return undefined;
}

/** Parses JSON text, naming the file and the line of a syntax error. */
export function parseJsonText(text: string, file: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    const message = (err as Error).message;
    const position = /at position (\d+)/.exec(message);
    // Node 20 leaves the position out of some messages ("Unexpected token '}', … is not valid JSON").
    const offset = position ? Number(position[1]) : jsonSyntaxErrorOffset(text);
    const line = offset === undefined ? undefined : lineAtOffset(text, offset);
    throw new CoordinationError("invalid", `not valid JSON (${message})`, { file, line });
  }
}

const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;

/** Where JSON text first goes wrong (a small scanner, used only to name the line of an error). */
export function jsonSyntaxErrorOffset(text: string): number | undefined {
  let i = 0;
  const fail = (): never => {
    throw new SyntaxAt(i);
  };
  const space = (): void => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const string = (): void => {
    for (i++; i < text.length; i++) {
      if (text[i] === '"') {
        i++;
        return;
      }
      if (text[i] === "\\") i++;
      else if (text[i]! < " ") fail();
    }
    fail();
  };
  const sequence = (close: string, item: () => void): void => {
    i++;
    space();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      item();
      space();
      if (text[i] === close) {
        i++;
        return;
      }
      if (text[i] !== ",") fail();
      i++;
    }
  };
  const value = (): void => {
    space();
    if (text[i] === "{") {
      sequence("}", () => {
        space();
        if (text[i] !== '"') fail();
        string();
        space();
        if (text[i] !== ":") fail();
        i++;
        value();
      });
    } else if (text[i] === "[") sequence("]", value);
    else if (text[i] === '"') string();
    else {
      LITERAL.lastIndex = i;
      if (LITERAL.exec(text) === null) fail();
      i = LITERAL.lastIndex;
    }
  };
  try {
    value();
    space();
    return i < text.length ? i : undefined;
  } catch (err) {
    if (err instanceof SyntaxAt) return err.offset;
    throw err;
  }
}

class SyntaxAt {
  constructor(readonly offset: number) {}
}

export function lineAtOffset(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** Describes one zod issue in plain words: a missing field says so rather than "received undefined". */
export function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  if (issue.path.length > 0 && valueAt(input, issue.path) === undefined) {
    if (issue.code === "invalid_type") return `required field is missing (expected ${issue.expected})`;
    if (issue.code === "invalid_value") {
      return `required field is missing (expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")})`;
    }
    if (issue.code === "invalid_union") return "required field is missing";
  }
  if (issue.code === "unrecognized_keys") return `unknown field(s): ${issue.keys.join(", ")}`;
  if (issue.code === "invalid_key") return `invalid name: ${issue.issues[0]?.message ?? issue.message}`;
  return issue.message;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * Checks `value` against `schema`; on failure throws a CoordinationError naming the file, the line
 * (given for one-line records, or found from `text` for whole files) and the first wrong field, and
 * carrying every problem found (`problems`), each located the same way.
 */
export function validateWith<T>(
  schema: z.ZodType<T>,
  value: unknown,
  where: { file: string; line?: number; text?: string },
): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => ({
    file: where.file,
    line: where.line ?? (where.text !== undefined ? lineOfPath(where.text, issue.path) : undefined),
    field: formatPath(issue.path),
    detail: describeIssue(issue, value),
  }));
  const [first] = problems as [LocatedProblem, ...LocatedProblem[]];
  const more = problems.length - 1;
  const detail = first.detail + (more > 0 ? ` (and ${more} more problem${more > 1 ? "s" : ""})` : "");
  throw new CoordinationError("invalid", detail, first, problems);
}

/** Reads a whole JSON file's text against a schema: syntax and schema errors both name file and line. */
export function parseJsonFile<T>(schema: z.ZodType<T>, text: string, file: string): T {
  return validateWith(schema, parseJsonText(text, file), { file, text });
}
