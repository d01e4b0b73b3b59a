import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Broker } from "../broker/index.js";
import type { OutboundPolicy } from "../http/outbound.js";
import type { GatewayAddress } from "./address.js";
import { AcpError } from "../protocol/index.js";
import type { Caller, Credentials } from "./credentials.js";
import type { Metrics } from "./metrics.js";
import type { OpenedByKey } from "./opened-by-key.js";
import type { PresenceTracker } from "./presence.js";
import type { PrincipalStore } from "./principals.js";
import type { Registry, ResolvedAgent } from "./registry.js";
import type { Relay } from "./relay.js";
import { deprecationHeaders } from "../wire/versions.js";

/**
 * The services the gateway core gives every route handler and extension; built once by
 * `startGateway`. Extensions reach the core only through these (and never through each other).
 */
export interface GatewayContext {
  broker: Broker;
  registry: Registry;
  /** The relay pipeline; `relay.onAccepted` tells of each message it accepts. */
  relay: Relay;
  presence: PresenceTracker;
  metrics: Metrics;
  logger: Logger;
  /** The one credential resolver: agent API keys, principal tokens, the admin token. */
  credentials: Credentials;
  /** What agents' API keys keep open, closed when a key is rotated or its agent revoked. */
  openedByKey: OpenedByKey;
  /** Human principals and their tokens (bucket `principals`). */
  principals: PrincipalStore;
  maxEnvelopeBytes: number;
  startedAt: Date;
  gatewayId: string;
  /** The one policy for URLs others supply (push notifications, A2A cards, webhooks): use its `fetch`. */
  outbound: OutboundPolicy;
  /** The gateway's own URL, hosts and allowed browser origins, from its configuration (never a request). */
  address: GatewayAddress;
}

/** An agent or the admin, as most endpoints accept; anything else is 401. */
export function authenticate(
  ctx: GatewayContext,
  req: IncomingMessage,
): Promise<Extract<Caller, { kind: "agent" | "admin" }>> {
  return ctx.credentials.resolve(req, ["agent", "admin"]);
}

/** The agent calling (its API key); the admin token is refused 403 Forbidden, no credential 401. */
export async function authenticateAgent(ctx: GatewayContext, req: IncomingMessage): Promise<ResolvedAgent> {
  const caller = await authenticate(ctx, req);
  if (caller.kind !== "agent")
    throw new AcpError("Forbidden", "this endpoint acts as an agent; use the agent's API key");
  return caller.agent;
}

/** Resolves only for the gateway's admin token; an agent's key is refused 403 Forbidden, none 401. */
export async function requireAdmin(ctx: GatewayContext, req: IncomingMessage): Promise<void> {
  const caller = await authenticate(ctx, req);
  if (caller.kind !== "admin")
    throw new AcpError("Forbidden", "this endpoint needs the gateway's admin token");
}

/**
 * An agent whose newest protocol version is deprecated is told so on every answer of the core's
 * agent endpoints: RFC 9745 `Deprecation` and RFC 8594 `Sunset` headers.
 */
export function announceDeprecation(ctx: GatewayContext, res: ServerResponse, caller: Caller): void {
  if (caller.kind !== "agent") return;
  const deprecation = ctx.registry.versions.deprecationOf(caller.agent.record.protocolVersions);
  if (!deprecation) return;
  for (const [name, value] of Object.entries(deprecationHeaders(deprecation))) res.setHeader(name, value);
}
