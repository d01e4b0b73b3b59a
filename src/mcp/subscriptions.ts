/**
 * `resources/subscribe` and `resources/unsubscribe` for one MCP server (one session): each
 * subscribed URI holds one watcher, found by asking the resolvers in turn; a change sends
 * `notifications/resources/updated {uri}`. The McpServer of SDK 1.x declares resources but has no
 * subscription handlers of its own, hence this.
 */
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  ErrorCode,
  McpError,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

/**
 * Starts watching `uri` if it is one of this resolver's, calling `onUpdated` on every change;
 * returns the function that stops watching, or undefined for a URI it does not know. Throws
 * (an McpError, or anything with a message) to refuse a URI it knows but the caller may not watch.
 */
export type SubscriptionResolver = (uri: string, onUpdated: () => void) => Promise<(() => void) | undefined>;

export class ResourceSubscriptions {
  readonly #active = new Map<string, () => void>();
  readonly #resolvers: SubscriptionResolver[] = [];
  #closed = false;

  /** Call before `server.connect`: it declares `resources.subscribe`. */
  constructor(private readonly server: McpServer) {
    server.server.registerCapabilities({ resources: { subscribe: true } });
    server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
      await this.subscribe(request.params.uri);
      return {};
    });
    server.server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
      this.unsubscribe(request.params.uri);
      return {};
    });
  }

  add(resolver: SubscriptionResolver): this {
    this.#resolvers.push(resolver);
    return this;
  }

  /** How many URIs are watched now. */
  get size(): number {
    return this.#active.size;
  }

  async subscribe(uri: string): Promise<void> {
    if (this.#active.has(uri)) return;
    for (const resolver of this.#resolvers) {
      const stop = await resolver(uri, () => this.#updated(uri));
      if (stop === undefined) continue;
      // Closed, or subscribed twice at once, while the watcher was being set up.
      if (this.#closed || this.#active.has(uri)) stop();
      else this.#active.set(uri, stop);
      return;
    }
    throw new McpError(ErrorCode.InvalidParams, `${uri} is not a resource this server can notify about`);
  }

  unsubscribe(uri: string): void {
    this.#active.get(uri)?.();
    this.#active.delete(uri);
  }

  /** Stops every watcher (the session ended). */
  close(): void {
    this.#closed = true;
    for (const stop of this.#active.values()) stop();
    this.#active.clear();
  }

  #updated(uri: string): void {
    if (!this.#active.has(uri) || !this.server.isConnected()) return;
    this.server.server.sendResourceUpdated({ uri }).catch(() => undefined);
  }
}
