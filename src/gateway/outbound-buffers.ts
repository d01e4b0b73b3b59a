import type { Socket } from "node:net";
import type { WebSocket } from "ws";

/** Default: bytes waiting in one agent socket's send buffer past which it gets no more deliveries. */
export const DEFAULT_SOCKET_BUFFER_BYTES = 1024 * 1024;
/** Default: bytes waiting in all agent sockets together past which no socket with a backlog gets more. */
export const DEFAULT_OUTBOUND_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * What the gateway holds for agents that do not read their sockets. A frame the kernel cannot take
 * waits in the process; a recipient that never reads would make the gateway hold every delivery it
 * is sent. So a socket stops getting deliveries while more than `socketLimit` bytes wait in its
 * buffer, and every socket with a backlog stops while all of them together hold more than
 * `gatewayLimit`; deliveries resume when that socket's buffer drains. A socket that flushes (a
 * reader keeping up) is never held back by another's backlog.
 *
 * A socket's backlog is counted once it passes the socket's high-water mark: from there the socket
 * announces the moment it drains (`drain`), which is when its count goes back to zero. Below it the
 * kernel takes the bytes within a turn, and nothing is counted.
 */
export class OutboundBuffers {
  private total = 0;

  constructor(
    readonly socketLimit: number = DEFAULT_SOCKET_BUFFER_BYTES,
    readonly gatewayLimit: number = DEFAULT_OUTBOUND_BUFFER_BYTES,
  ) {}

  /** Bytes waiting in agent sockets, gateway-wide (an upper bound until each drains). */
  get bytes(): number {
    return this.total;
  }

  /** The backlog of one agent socket. */
  track(ws: WebSocket): SocketBacklog {
    return new SocketBacklog(ws, this);
  }

  /** @internal */
  adjust(delta: number): void {
    this.total += delta;
  }

  /** @internal */
  holds(counted: number): boolean {
    return counted > this.socketLimit || (counted > 0 && this.total > this.gatewayLimit);
  }
}

export class SocketBacklog {
  private counted = 0;
  private drained: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly ws: WebSocket,
    private readonly buffers: OutboundBuffers,
  ) {}

  /** Call after sending: counts what now waits in the socket. */
  sent(): void {
    const socket = netSocketOf(this.ws);
    if (!socket) return;
    const buffered = this.ws.bufferedAmount;
    const counted = buffered > socket.writableHighWaterMark ? buffered : 0;
    this.buffers.adjust(counted - this.counted);
    this.counted = counted;
    if (counted > 0 && !this.drained) {
      this.drained = new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      socket.once("drain", () => this.clear());
    }
  }

  /** True while this socket must not be sent another delivery. */
  get full(): boolean {
    return this.buffers.holds(this.counted);
  }

  /** Resolves when the socket's buffer has drained (or `release` was called). */
  untilDrained(): Promise<void> {
    return this.drained ?? Promise.resolve();
  }

  /** The socket closed: its bytes are no longer held. */
  release(): void {
    this.clear();
  }

  private clear(): void {
    this.buffers.adjust(-this.counted);
    this.counted = 0;
    this.drained = undefined;
    this.wake?.();
    this.wake = undefined;
  }
}

/** The TCP socket under a `ws` WebSocket (not part of its typed API; undefined once closed). */
export function netSocketOf(ws: WebSocket): Socket | undefined {
  return (ws as unknown as { _socket?: Socket })._socket;
}

const corked = new WeakSet<Socket>();

/**
 * Frames sent on `ws` in this turn of the event loop (deliveries, answers, Phoenix replies: the
 * submits or acknowledgements a commit batch settles are answered together) leave in one write (one
 * syscall) instead of one each. (nextTick would uncork before the inbox's next promise resolves,
 * batching nothing.)
 */
export function corkUntilNextTurn(ws: WebSocket): void {
  const socket = netSocketOf(ws);
  if (!socket || corked.has(socket)) return;
  corked.add(socket);
  socket.cork();
  setImmediate(() => {
    corked.delete(socket);
    socket.uncork();
  });
}
