import type { ServerResponse } from "node:http";

/** A slow reader that lets this much pile up is cut off rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

/**
 * One Server-Sent Events response: `event:`/`data:` frames, a `: keep-alive` comment at an interval
 * (so proxies and the browser see the connection alive), and a clean end on either side's close.
 */
export class EventStream {
  private readonly keepAlive: NodeJS.Timeout;
  private readonly closeHandlers: (() => void)[] = [];
  private ended = false;

  constructor(
    private readonly res: ServerResponse,
    keepAliveMs: number,
  ) {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      // nginx and similar proxies would otherwise buffer the stream.
      "x-accel-buffering": "no",
    });
    res.write("retry: 3000\n: connected\n\n");
    this.keepAlive = setInterval(() => this.write(": keep-alive\n\n"), keepAliveMs);
    this.keepAlive.unref();
    res.once("close", () => this.finish());
  }

  get open(): boolean {
    return !this.ended;
  }

  send(event: string, data: unknown): void {
    this.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  onClose(handler: () => void): void {
    if (this.ended) handler();
    else this.closeHandlers.push(handler);
  }

  end(): void {
    if (this.ended) return;
    this.res.end();
    this.finish();
  }

  private write(text: string): void {
    if (this.ended) return;
    if (this.res.writableLength > MAX_BUFFERED_BYTES) {
      this.res.destroy();
      this.finish();
      return;
    }
    this.res.write(text);
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepAlive);
    for (const handler of this.closeHandlers.splice(0)) handler();
  }
}
