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

/**
 * The `data` of each event in a Server-Sent Events body, in order (an event without data is
 * skipped; several `data:` lines join with "\n"). CRLF, CR and LF all end lines. The work is linear
 * in the body's length: received text is joined only once an event ends in it, so a peer sending one
 * endless event costs what it sends, not its square. The body's own limit bounds that (a stream
 * read through the outbound URL policy stops at its `maxResponseBytes`).
 */
export async function* sseData(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending: string[] = [];
  /** The last character of the text pending, which may be the first "\n" of an event's end. */
  let tail = "";
  /** A CR at the end of a chunk: its LF may start the next one. */
  let cr = false;
  for await (const chunk of body) {
    let text: string = (cr ? "\r" : "") + decoder.decode(chunk, { stream: true });
    cr = text.endsWith("\r");
    if (cr) text = text.slice(0, -1);
    text = text.replace(/\r\n?/g, "\n");
    if (text === "") continue;
    if (`${tail}${text}`.indexOf("\n\n") === -1) {
      pending.push(text);
      tail = text.at(-1) ?? tail;
      continue;
    }
    let buffer = pending.join("") + text;
    pending = [];
    for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n")) {
      const data = buffer
        .slice(0, end)
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
        .join("\n");
      buffer = buffer.slice(end + 2);
      if (data !== "") yield data;
    }
    if (buffer !== "") pending.push(buffer);
    tail = buffer.at(-1) ?? "";
  }
}
