/**
 * The HTTP requests a gateway is answering, so that closing it lets them finish first, for a
 * while: a request that does not end by itself (a client that stopped sending its body, a
 * blocking call waiting for an agent's answer) must not keep the gateway from stopping.
 */
import type { IncomingMessage } from "node:http";

/** How long `close` waits for requests in progress by default. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;

export class InFlightRequests {
  readonly #requests = new Set<IncomingMessage>();
  #drained: (() => void) | undefined;

  /** Requests in progress now. */
  get size(): number {
    return this.#requests.size;
  }

  /** Counts `req` until `done` is called. */
  begin(req: IncomingMessage): () => void {
    this.#requests.add(req);
    return () => {
      this.#requests.delete(req);
      if (this.#requests.size === 0) this.#drained?.();
    };
  }

  /**
   * Waits until no request is in progress, or `graceMs` passed; returns what was still in
   * progress then (method and path, no query: it may carry a token), for the log.
   */
  async drain(graceMs: number): Promise<string[]> {
    if (this.#requests.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
      this.#drained = undefined;
    }
    return [...this.#requests].map((req) => `${req.method ?? "?"} ${(req.url ?? "").split("?")[0]}`);
  }
}
