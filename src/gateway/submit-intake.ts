import type { WebSocket } from "ws";

/** Default high-water mark: WebSocket submissions in progress (received, not yet answered) gateway-wide. */
export const DEFAULT_MAX_SUBMITS_IN_PROGRESS = 2_048;

/**
 * Backpressure on WebSocket submissions. A gateway offered more than its broker stores spent its
 * CPU parsing and verifying submissions that then waited, or were refused, while the deliveries and
 * acks of stored messages starved. Past the high-water mark, a connection that submits is no
 * longer read (TCP pushes back on its client) until the submissions in progress fall to half the
 * mark; then every paused connection is read again. Nothing is refused or lost: frames wait in the
 * sockets. A gateway whose broker keeps up never reaches the mark.
 */
export class SubmitIntake {
  #inProgress = 0;
  readonly #paused = new Set<WebSocket>();

  constructor(
    private readonly high: number,
    private readonly onPause: () => void = () => undefined,
  ) {}

  get inProgress(): number {
    return this.#inProgress;
  }

  get pausedConnections(): number {
    return this.#paused.size;
  }

  /** A submission from `ws` starts; past the mark, `ws` is not read until the backlog halves. */
  begin(ws: WebSocket): void {
    this.#inProgress += 1;
    if (this.#inProgress >= this.high && !this.#paused.has(ws)) {
      ws.pause();
      this.#paused.add(ws);
      this.onPause();
    }
  }

  /** A submission was answered. */
  end(): void {
    this.#inProgress -= 1;
    if (this.#paused.size > 0 && this.#inProgress <= this.high / 2) {
      for (const ws of this.#paused) ws.resume();
      this.#paused.clear();
    }
  }

  /** The connection closed: nothing to resume. */
  forget(ws: WebSocket): void {
    this.#paused.delete(ws);
  }
}
