import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";
import type { Broker } from "../broker/index.js";
import { AcpError } from "../protocol/index.js";
import { credentialOf, hashSecret } from "./auth.js";
import type { Metrics } from "./metrics.js";
import type { PresenceTracker } from "./presence.js";
import type { Registry, ResolvedAgent } from "./registry.js";
import type { Relay } from "./relay.js";

/** Everything a route handler may use; built once by startGateway. */
export interface GatewayContext {
  broker: Broker;
  registry: Registry;
  relay: Relay;
  presence: PresenceTracker;
  metrics: Metrics;
  logger: Logger;
  /** SHA-256 of the admin token; the token itself is not kept. */
  adminTokenHash: string;
  maxEnvelopeBytes: number;
  startedAt: Date;
  gatewayId: string;
}

export type Caller = { kind: "agent"; agent: ResolvedAgent } | { kind: "admin" };

/** Resolves the request's credential to an agent or the admin; anything else is 401. */
export async function authenticate(ctx: GatewayContext, req: IncomingMessage): Promise<Caller> {
  const credential = credentialOf(req.headers);
  if (!credential)
    throw new AcpError("Unauthorized", "send an API key (X-API-Key, Api-Key or Authorization: Bearer)");
  const hash = hashSecret(credential);
  if (timingSafeEqual(Buffer.from(hash, "hex"), Buffer.from(ctx.adminTokenHash, "hex")))
    return { kind: "admin" };
  const agent = await ctx.registry.authenticateHash(hash);
  if (!agent) throw new AcpError("Unauthorized", "unknown or revoked API key");
  return { kind: "agent", agent };
}

export async function authenticateAgent(ctx: GatewayContext, req: IncomingMessage): Promise<ResolvedAgent> {
  const caller = await authenticate(ctx, req);
  if (caller.kind !== "agent")
    throw new AcpError("Forbidden", "this endpoint acts as an agent; use the agent's API key");
  return caller.agent;
}

export async function requireAdmin(ctx: GatewayContext, req: IncomingMessage): Promise<void> {
  const caller = await authenticate(ctx, req);
  if (caller.kind !== "admin")
    throw new AcpError("Forbidden", "this endpoint needs the gateway's admin token");
}
