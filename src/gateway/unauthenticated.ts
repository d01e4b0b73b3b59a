import type { Duplex } from "node:stream";

/** Default: WebSocket connections still authenticating, gateway-wide. */
export const DEFAULT_MAX_UNAUTHENTICATED_SOCKETS = 1_024;
/**
 * Bytes a connection may send before it has authenticated: the `auth` frame is well under 1 KiB.
 * Without this bound each of those sockets could hold a frame up to the WebSocket payload limit
 * (twice the envelope limit) for the whole authentication window.
 */
export const MAX_UNAUTHENTICATED_BYTES = 16 * 1024;

/** One connection's place among the unauthenticated ones. */
export interface Pending {
  /** Starts counting what the client sends (once the WebSocket reads the socket). */
  limitBytes(): void;
  /** It authenticated, or was refused: it no longer counts. */
  end(): void;
}

/**
 * The WebSocket connections that have not authenticated yet. One that waits for its first-frame
 * `auth` (browsers cannot set headers) may sit there for the whole authentication timeout, and a
 * stranger needs no key to open it: those are capped in number gateway-wide (past the cap such an
 * upgrade gets 503 with `Retry-After`). One that brought its API key in a header is checked at
 * once (one cached registry look-up) and does not count, so a stranger filling the cap does not
 * keep agents out. Every one may send at most MAX_UNAUTHENTICATED_BYTES before it authenticates.
 */
export class UnauthenticatedSockets {
  #count = 0;

  constructor(
    private readonly max: number,
    private readonly maxBytes = MAX_UNAUTHENTICATED_BYTES,
  ) {}

  get count(): number {
    return this.#count;
  }

  /**
   * A place for `socket` (the upgrade's raw socket); undefined past the cap when it `waits` for a
   * first-frame `auth`.
   */
  admit(socket: Duplex, waits: boolean): Pending | undefined {
    if (waits && this.#count >= this.max) return undefined;
    if (waits) this.#count += 1;
    let received = 0;
    let ended = false;
    const guard = (chunk: Buffer) => {
      received += chunk.length;
      if (received > this.maxBytes) socket.destroy();
    };
    const end = () => {
      if (ended) return;
      ended = true;
      if (waits) this.#count -= 1;
      socket.off("data", guard);
      socket.off("close", end);
    };
    socket.once("close", end);
    return {
      limitBytes: () => {
        if (!ended) socket.on("data", guard);
      },
      end,
    };
  }
}

const REFUSAL = "too many connections are authenticating; retry soon\n";

/** The answer to an upgrade past the cap: nothing was read, nothing is kept. */
export function refuseUpgrade(socket: Duplex): void {
  socket.end(
    `HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: ${REFUSAL.length}\r\nConnection: close\r\n\r\n${REFUSAL}`,
  );
}
