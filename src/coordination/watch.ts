/**
 * Change notification for a session directory: fs.watch wakes us quickly where it works, and a
 * polling timer covers where it does not (network file systems, exhausted inotify watches). Either
 * way a change is reported only when a file's signature (inode, size, mtime) really differs, so
 * callers get no duplicates and miss nothing.
 */
import { type FSWatcher, watch } from "node:fs";
import { lstat } from "node:fs/promises";
import type { SessionPaths } from "./paths.js";

export type SessionChange = "coordination" | "events" | "reports" | "data";

export interface WatchOptions {
  /** Polling period, the upper bound on how late a change is noticed (default 250 ms). */
  intervalMs?: number;
  /** Skip fs.watch and only poll (tests of the fallback, or file systems where watch lies). */
  pollOnly?: boolean;
}

export interface SessionWatcher {
  /** Resolves once the starting state is recorded: changes after this are reported. */
  ready: Promise<void>;
  close(): void;
}

export function watchSession(
  paths: SessionPaths,
  onChange: (changes: SessionChange[]) => void,
  options: WatchOptions = {},
): SessionWatcher {
  const targets: Record<SessionChange, string> = {
    coordination: paths.coordination,
    events: paths.messages,
    reports: paths.reports,
    data: paths.data,
  };
  let last: Record<SessionChange, string> | undefined;
  let closed = false;
  let running = false;
  let again = false;

  const check = async (): Promise<void> => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        const now = await signatures(targets);
        if (closed) return;
        if (last !== undefined) {
          const changed = (Object.keys(now) as SessionChange[]).filter((k) => now[k] !== last?.[k]);
          last = now;
          if (changed.length > 0) onChange(changed);
        } else {
          last = now;
        }
      } while (again && !closed);
    } finally {
      running = false;
    }
  };
  const poke = (): void => {
    if (!closed) void check();
  };

  const watchers: FSWatcher[] = [];
  if (!options.pollOnly) {
    for (const dir of [paths.dir, paths.reports, paths.data]) {
      try {
        watchers.push(watch(dir, { persistent: false }, poke).on("error", () => undefined));
      } catch {
        // Not watchable here: polling alone still notices every change.
      }
    }
  }
  const timer = setInterval(poke, options.intervalMs ?? 250);
  return {
    ready: check(),
    close() {
      closed = true;
      clearInterval(timer);
      for (const w of watchers) w.close();
    },
  };
}

async function signatures(targets: Record<SessionChange, string>): Promise<Record<SessionChange, string>> {
  const entries = await Promise.all(
    (Object.entries(targets) as [SessionChange, string][]).map(async ([kind, path]) => {
      // lstat: a link's target is never watched (its changes are not the session's).
      const info = await lstat(path).catch(() => undefined);
      return [kind, info ? `${info.ino}:${info.size}:${info.mtimeMs}` : "absent"] as const;
    }),
  );
  return Object.fromEntries(entries) as Record<SessionChange, string>;
}
