import type { Api } from "./api.js";
import type { Me } from "./types.js";

/** What every view gets: the API, who is signed in, the live stream, navigation. */
export interface AppContext {
  api: Api;
  me: Me;
  /** Live stream events (`summary`, `status`, `changed`); returns the unsubscribe function. */
  on(listener: (event: string, data: unknown) => void): () => void;
  navigate(hash: string): void;
}

/** Renders into `root`; may resolve with a cleanup, run when the view is left. */
export type View = (
  root: HTMLElement,
  app: AppContext,
  params: string[],
) => Promise<(() => void) | undefined>;

/** Runs `fn` at most once per `ms`, after the first call of a burst (live events come in bursts). */
export function coalesce(fn: () => void, ms: number): { call(): void; cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return {
    call() {
      timer ??= setTimeout(() => {
        timer = undefined;
        fn();
      }, ms);
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
