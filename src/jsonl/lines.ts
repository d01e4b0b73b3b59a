/**
 * Reading an append-only JSONL file line by line, and the one repair a single writer may make:
 * moving a torn last line (a crash mid-write left it without its newline) aside.
 */
import { createReadStream } from "node:fs";
import { type FileHandle, open, stat, truncate, writeFile } from "node:fs/promises";

export const NEWLINE = 0x0a;

export interface FileLine {
  /** 1-based line number in the file. */
  number: number;
  text: string;
  /** False only for a final segment without its newline: a torn write or one still in progress. */
  complete: boolean;
}

/** Streams a file's lines. Splits on bytes, so a multi-byte character across chunks stays whole. */
export async function* readLines(path: string): AsyncGenerator<FileLine> {
  let pending: Buffer[] = [];
  let number = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 })) {
    const buf = chunk as Buffer;
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE, start); nl !== -1; nl = buf.indexOf(NEWLINE, start)) {
      pending.push(buf.subarray(start, nl));
      number++;
      yield { number, text: Buffer.concat(pending).toString("utf8"), complete: true };
      pending = [];
      start = nl + 1;
    }
    if (start < buf.length) pending.push(buf.subarray(start));
  }
  if (pending.length > 0)
    yield { number: number + 1, text: Buffer.concat(pending).toString("utf8"), complete: false };
}

/** Position just after the last newline (0 if none); bytes past it are an incomplete line. */
export async function endOfLastCompleteLine(fh: FileHandle, size: number): Promise<number> {
  const chunkSize = 64 * 1024;
  let end = size;
  while (end > 0) {
    const start = Math.max(0, end - chunkSize);
    const buf = Buffer.alloc(end - start);
    await fh.read(buf, 0, buf.length, start);
    const nl = buf.lastIndexOf(NEWLINE);
    if (nl !== -1) return start + nl + 1;
    end = start;
  }
  return 0;
}

/** The last complete line of a file (without its newline), or undefined if it has none. */
export async function readLastCompleteLine(path: string): Promise<string | undefined> {
  const fh = await open(path, "r");
  try {
    const end = await endOfLastCompleteLine(fh, (await fh.stat()).size);
    if (end === 0) return undefined;
    const start = await endOfLastCompleteLine(fh, end - 1);
    const buf = Buffer.alloc(end - 1 - start);
    await fh.read(buf, 0, buf.length, start);
    return buf.toString("utf8");
  } finally {
    await fh.close();
  }
}

export interface TornTailRecovery {
  file: string;
  /** Where the incomplete bytes were moved, kept for forensics. */
  movedTo: string;
  bytes: number;
}

/**
 * After a crash mid-write the file may end without a newline. Those bytes are copied aside to
 * `<file>.torn-<time>` and cut off, so the next append starts on a fresh line and readers never see
 * them. Copy first, then truncate: a crash in between only repeats the copy on the next open.
 * Only for a file with a single writer: with several, the "torn" bytes may be a line in flight.
 */
export async function repairTornTail(path: string, now: Date): Promise<TornTailRecovery | undefined> {
  const fh = await open(path, "r");
  let torn: Buffer;
  let keep: number;
  try {
    const size = (await fh.stat()).size;
    keep = await endOfLastCompleteLine(fh, size);
    if (keep === size) return undefined;
    torn = Buffer.alloc(size - keep);
    await fh.read(torn, 0, torn.length, keep);
  } finally {
    await fh.close();
  }
  const movedTo = `${path}.torn-${now.toISOString().replace(/[:.]/g, "-")}`;
  await writeFile(movedTo, torn, { mode: 0o600 });
  await truncate(path, keep);
  return { file: path, movedTo, bytes: torn.length };
}

/** A file's size in bytes; 0 when it does not exist. */
export async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
}
