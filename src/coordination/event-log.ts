/**
 * messages.jsonl: one event per line, appended by any number of processes through a shared-writers
 * `AppendLog`: each append is ONE write(2) on an O_APPEND descriptor, so concurrent writers never
 * interleave inside a line, and a torn line a crashed writer left is ended first. Readers only parse lines that end in "\n"; a
 * trailing fragment is either a write still in flight (left for later) or a torn line from a crash
 * (reported with its line number, never parsed as garbage).
 */
import { dirname } from "node:path";
import type { z } from "zod";
import { AppendLog, AppendLogError } from "../jsonl/index.js";
import { CoordinationError } from "./errors.js";
import { sleep } from "./fs-atomic.js";
import { quickEvent } from "./quick-check.js";
import type { SessionEvent } from "./schemas.js";
import { openSessionFile } from "./session-files.js";
import { validateWith } from "./validate.js";

/** Larger events belong in a data artifact; the cap also keeps every append a single write. */
export const MAX_EVENT_BYTES = 256 * 1024;
const NEWLINE = 0x0a;

export interface LoggedEvent {
  /** 1-based line number in messages.jsonl. */
  line: number;
  event: SessionEvent;
}

export interface LogProblem {
  /** torn: a line cut short by a crash or a failed write; invalid: a complete line that is wrong. */
  kind: "torn" | "invalid";
  file: string;
  line: number;
  /** Byte offset of the line's start. */
  offset: number;
  bytes: number;
  message: string;
}

/** Where a reader has got to: the byte offset and line number of the next unread line. */
export interface LogPosition {
  offset: number;
  line: number;
}

export interface LogChunk {
  events: LoggedEvent[];
  problems: LogProblem[];
  next: LogPosition;
  /** Bytes after `next` that do not end in a newline yet. */
  pendingBytes: number;
}

/**
 * Appends one event to a messages.jsonl as a single write of one line, so concurrent writers never
 * interleave; an event over MAX_EVENT_BYTES is refused (put large data in an artifact).
 */
export async function appendEvent(path: string, event: SessionEvent): Promise<void> {
  const line = Buffer.from(`${JSON.stringify(event)}\n`, "utf8");
  if (line.length > MAX_EVENT_BYTES) {
    throw new CoordinationError(
      "invalid",
      `event is ${line.length} bytes, more than ${MAX_EVENT_BYTES}: put large data in an artifact`,
      { file: path },
    );
  }
  try {
    await AppendLog.shared(path, { fileMode: 0o644 }).append(line);
  } catch (err) {
    if (err instanceof AppendLogError) throw new CoordinationError("torn", err.detail, { file: path });
    throw err;
  }
}

/** Reads the complete lines from `from` on; a trailing fragment is left unread (see pendingBytes). */
export async function readEventsFrom(
  path: string,
  from: LogPosition = { offset: 0, line: 1 },
): Promise<LogChunk> {
  const bytes = await readBytesFrom(path, from.offset);
  const events: LoggedEvent[] = [];
  const problems: LogProblem[] = [];
  let start = 0;
  let line = from.line;
  let schemas: typeof import("./schemas.js") | undefined;
  for (let end = bytes.indexOf(NEWLINE); end !== -1; end = bytes.indexOf(NEWLINE, start)) {
    const text = bytes.subarray(start, end).toString("utf8").replace(/\r$/, "");
    const offset = from.offset + start;
    if (text.trim() !== "") {
      let parsed = parseLine(text, path, line, offset);
      if ("unchecked" in parsed) {
        schemas ??= await import("./schemas.js");
        parsed = checkLine(parsed.unchecked, schemas.SessionEventSchema, text, path, line, offset);
      }
      if ("event" in parsed) events.push({ line, event: parsed.event });
      else problems.push(parsed);
    }
    start = end + 1;
    line++;
  }
  return {
    events,
    problems,
    next: { offset: from.offset + start, line },
    pendingBytes: bytes.length - start,
  };
}

/**
 * Reads the whole log. A trailing fragment gets a moment to be completed by a writer still in flight;
 * if it stays, it is reported as a torn line.
 */
export async function readEventLog(
  path: string,
  options: { settleMs?: number } = {},
): Promise<{ events: LoggedEvent[]; problems: LogProblem[] }> {
  const events: LoggedEvent[] = [];
  const problems: LogProblem[] = [];
  let position: LogPosition = { offset: 0, line: 1 };
  for (let attempt = 0; ; attempt++) {
    const chunk = await readEventsFrom(path, position);
    events.push(...chunk.events);
    problems.push(...chunk.problems);
    position = chunk.next;
    if (chunk.pendingBytes === 0) break;
    if (attempt >= 3) {
      problems.push(tornProblem(path, position, chunk.pendingBytes));
      break;
    }
    await sleep(options.settleMs ?? 20);
  }
  return { events, problems };
}

export function tornProblem(file: string, at: LogPosition, bytes: number): LogProblem {
  return {
    kind: "torn",
    file,
    line: at.line,
    offset: at.offset,
    bytes,
    message: `${file}:${at.line}: torn line (${bytes} bytes with no newline, cut short by a crash?): not parsed`,
  };
}

function problemAt(
  text: string,
  file: string,
  line: number,
  offset: number,
): (kind: LogProblem["kind"], message: string) => LogProblem {
  const bytes = Buffer.byteLength(text);
  return (kind, message) => ({ kind, file, line, offset, bytes, message });
}

/** A line's event when it passes the quick check; its value when only the schema can tell. */
function parseLine(
  text: string,
  file: string,
  line: number,
  offset: number,
): { event: SessionEvent } | { unchecked: unknown } | LogProblem {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const reason = (err as Error).message;
    const problem = problemAt(text, file, line, offset);
    if (isTruncatedJson(text, reason)) {
      const bytes = Buffer.byteLength(text);
      return problem("torn", `${file}:${line}: torn line (${bytes} bytes of an event cut short): not parsed`);
    }
    return problem("invalid", `${file}:${line}: not valid JSON (${reason})`);
  }
  const event = quickEvent(value);
  return event ? { event } : { unchecked: value };
}

/** The schema's verdict on a line the quick check left to it, every problem named. */
function checkLine(
  value: unknown,
  schema: z.ZodType<SessionEvent>,
  text: string,
  file: string,
  line: number,
  offset: number,
): { event: SessionEvent } | LogProblem {
  try {
    return { event: validateWith(schema, value, { file, line }) };
  } catch (err) {
    if (err instanceof CoordinationError) return problemAt(text, file, line, offset)("invalid", err.message);
    throw err;
  }
}

/** JSON that stops early (rather than JSON with a wrong character) is a line cut short. */
function isTruncatedJson(text: string, message: string): boolean {
  if (/end of JSON input/.test(message)) return true;
  const position = /at position (\d+)/.exec(message);
  return position !== null && Number(position[1]) >= text.length && text.startsWith("{");
}

/** The log lives in its session directory: it is read only as a regular file really there. */
async function readBytesFrom(path: string, offset: number): Promise<Buffer> {
  const handle = await openSessionFile(dirname(path), path);
  if (!handle) return Buffer.alloc(0);
  try {
    const { size } = await handle.stat();
    if (size < offset) {
      throw new CoordinationError(
        "invalid",
        `shrank from ${offset} to ${size} bytes: the log was truncated`,
        {
          file: path,
        },
      );
    }
    const buffer = Buffer.alloc(size - offset);
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, offset + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  } finally {
    await handle.close();
  }
}
