/**
 * The legacy MCP HTTP+SSE transport (protocol 2024-11-05) as seed 004 specifies it: `GET /mcp/sse`
 * opens the stream, whose first event (`endpoint`) is the URL to POST to, `/mcp/messages/{id}`;
 * every answer and notification comes back on the stream as an `event: message`.
 *
 * Not the SDK's SSEServerTransport: that one always appends `?sessionId=` to its endpoint, so it
 * cannot give seed 004's URL. The wire format is the same, so the SDK's SSEClientTransport (and
 * any legacy client) works with it. A comment line every `keepAliveMs` keeps proxies from cutting
 * an idle stream.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type MessageExtraInfo,
} from "@modelcontextprotocol/sdk/types.js";
import { readBody } from "../../http/server.js";
import { answerToMalformedParams } from "../../mcp/params-guard.js";

/** A reader this far behind is cut off rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

export class LegacySseTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  #keepAlive: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    readonly sessionId: string,
    private readonly endpoint: string,
    private readonly res: ServerResponse,
    private readonly keepAliveMs: number,
  ) {}

  get open(): boolean {
    return !this.#closed;
  }

  async start(): Promise<void> {
    this.res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store, no-transform",
      connection: "keep-alive",
      // nginx and similar proxies would otherwise buffer the stream.
      "x-accel-buffering": "no",
    });
    this.res.write(`event: endpoint\ndata: ${this.endpoint}\n\n`);
    this.#keepAlive = setInterval(() => this.#write(": keep-alive\n\n"), this.keepAliveMs);
    this.#keepAlive.unref();
    this.res.once("close", () => this.#finish());
  }

  /**
   * A POST to the endpoint: one JSON-RPC message (or a batch), answered 202; replies go on the
   * stream. A request whose params break the JSON-RPC message schema is answered -32602 there too.
   */
  async handlePost(req: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<void> {
    // Each message is either for the server or already refused (its answer).
    let messages: ({ message: JSONRPCMessage } | { refusal: JSONRPCErrorResponse })[];
    try {
      const parsed: unknown = JSON.parse((await readBody(req, maxBytes)).toString("utf8"));
      messages = (Array.isArray(parsed) ? parsed : [parsed]).map((m) => {
        const refusal = answerToMalformedParams(m);
        return refusal === undefined ? { message: JSONRPCMessageSchema.parse(m) } : { refusal };
      });
    } catch (err) {
      const message =
        err instanceof SyntaxError ? "the body is not JSON" : "the body is not a JSON-RPC message";
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message } }));
      return;
    }
    res.writeHead(202, { "content-type": "text/plain" }).end("Accepted");
    const requestInfo = { headers: req.headers };
    for (const item of messages) {
      if ("refusal" in item) await this.send(item.refusal).catch(() => undefined);
      else this.onmessage?.(item.message, { requestInfo });
    }
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) throw new Error("the SSE stream is closed");
    this.#write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.res.end();
    this.#finish();
  }

  /** Armed keep-alive timers (0 once closed): for leak checks. */
  get timers(): number {
    return this.#keepAlive === undefined ? 0 : 1;
  }

  #write(text: string): void {
    if (this.#closed) return;
    if (this.res.writableLength > MAX_BUFFERED_BYTES) {
      this.res.destroy();
      this.#finish();
      return;
    }
    this.res.write(text);
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
    this.onclose?.();
  }
}
