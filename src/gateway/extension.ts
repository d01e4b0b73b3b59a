import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { GatewayContext } from "./context.js";
import type { Router } from "../http/server.js";

export type { Caller, CallerKind, Credentials } from "./credentials.js";
export type { GatewayContext } from "./context.js";
export type { AcceptedMessage } from "./relay-types.js";

/**
 * A server-side feature mounted on the gateway core (dashboard, collaboration, the MCP endpoint,
 * approvals…), like a fastify plugin: `mount` receives the gateway's services up front
 * (`GatewayContext`: broker, registry, relay with its accepted-message event, presence, metrics,
 * logger, the credential resolver and the principal store) and its router, registers its routes, and
 * returns the hooks it needs. The core knows extensions only by this interface. An extension never
 * reads another's storage; when one needs another's feature, the composition root hands it that
 * feature's service.
 *
 * Lifecycle, in order: `mount` (synchronous, before the server listens), `start` (awaited before
 * the gateway reports ready; a rejection stops start-up), then, when the gateway closes,
 * `beforeDrain`, and once in-flight requests finished, `close` (before the broker closes).
 */
export interface GatewayExtension {
  /** Unique among the extensions of one gateway. */
  readonly name: string;
  /** Mounts the extension on a gateway, once: registers its routes on `router`, returns its hooks. */
  mount(ctx: GatewayContext, router: Router): ExtensionHooks;
}

/** What a mounted extension does beyond its routes; each hook is optional. */
export interface ExtensionHooks {
  /**
   * An HTTP upgrade on a path the core does not serve (the core keeps `/api/v1/ws`). Returns true
   * when it took the socket; when no extension does, the socket is destroyed.
   */
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer, path: string): boolean;
  /** Opens what the extension needs (watches, indexes); awaited before the gateway is ready. */
  start?(): Promise<void>;
  /** The gateway began closing and is about to wait for in-flight requests: end long polls now. */
  beforeDrain?(): void;
  close?(): Promise<void>;
}
