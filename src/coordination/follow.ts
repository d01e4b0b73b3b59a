import {
  type LoggedEvent,
  type LogPosition,
  type LogProblem,
  readEventsFrom,
  tornProblem,
} from "./event-log.js";
import { type EventFilter, matchesFilter } from "./queries.js";
import type { Session } from "./session.js";
import type { WatchOptions } from "./watch.js";

export interface FollowOptions {
  filter?: EventFilter;
  /** Deliver the events already in the log first (default true); false starts at the current end. */
  fromStart?: boolean;
  /** Stops following; the returned promise then resolves. */
  signal?: AbortSignal;
  onProblem?: (problem: LogProblem) => void;
  /** A trailing fragment unchanged this long is reported as torn (default 1000 ms). */
  tornAfterMs?: number;
  watch?: WatchOptions;
}

/**
 * `tail -f messages.jsonl`, but line-exact: every complete line is delivered once, in file order; a
 * fragment still being written waits for its newline; a torn line is reported once.
 */
export async function followEvents(
  session: Session,
  onEvent: (event: LoggedEvent) => void,
  options: FollowOptions = {},
): Promise<void> {
  const path = session.paths.messages;
  const tornAfterMs = options.tornAfterMs ?? 1000;
  const reportedTorn = new Set<number>();
  let position: LogPosition = { offset: 0, line: 1 };
  let fragment: { offset: number; bytes: number; since: number } | undefined;
  let recheck: NodeJS.Timeout | undefined;
  let running = false;
  let again = false;

  const report = (problem: LogProblem): void => {
    if (problem.kind === "torn") {
      if (reportedTorn.has(problem.offset)) return;
      reportedTorn.add(problem.offset);
    }
    options.onProblem?.(problem);
  };

  const drainOnce = async (deliver: boolean): Promise<void> => {
    const chunk = await readEventsFrom(path, position);
    if (deliver) {
      for (const logged of chunk.events)
        if (matchesFilter(logged.event, options.filter ?? {})) onEvent(logged);
      for (const problem of chunk.problems) report(problem);
    }
    position = chunk.next;
    if (chunk.pendingBytes === 0) {
      fragment = undefined;
      return;
    }
    const now = Date.now();
    if (fragment?.offset !== position.offset || fragment.bytes !== chunk.pendingBytes) {
      fragment = { offset: position.offset, bytes: chunk.pendingBytes, since: now };
    } else if (now - fragment.since >= tornAfterMs) {
      report(tornProblem(path, position, chunk.pendingBytes));
    }
    clearTimeout(recheck);
    recheck = setTimeout(() => void drain(), tornAfterMs);
  };

  const drain = async (): Promise<void> => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        await drainOnce(true);
      } while (again && !options.signal?.aborted);
    } catch (err) {
      fail(err); // e.g. the log was truncated under us: end the follow with that error
    } finally {
      running = false;
    }
  };

  if (options.signal?.aborted) return;
  let fail: (err: unknown) => void = () => undefined;
  const stopped = new Promise<void>((resolve, reject) => {
    fail = reject;
    options.signal?.addEventListener("abort", () => resolve(), { once: true });
  });
  const watcher = session.watch((changes) => {
    if (changes.includes("events")) void drain();
  }, options.watch);
  try {
    await watcher.ready;
    if (options.fromStart === false) await drainOnce(false);
    await drain();
    await stopped;
  } finally {
    watcher.close();
    clearTimeout(recheck);
  }
}
