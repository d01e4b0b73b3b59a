/** Append-only JSONL files: one write path (single or shared writers), line readers, a writer lock. */
export { AppendLog, type AppendLogOptions, type SingleWriterOptions } from "./append-log.js";
export { AppendLogError } from "./errors.js";
export {
  endOfLastCompleteLine,
  type FileLine,
  fileSize,
  NEWLINE,
  readLastCompleteLine,
  readLines,
  repairTornTail,
  type TornTailRecovery,
} from "./lines.js";
export { acquireWriterLock, acquireWriterLockWithin, releaseWriterLock } from "./writer-lock.js";
