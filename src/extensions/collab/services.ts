import type { IncomingMessage } from "node:http";
import type { KvBucket } from "../../broker/index.js";
import type { EventStream } from "../../http/sse.js";
import { authenticate, type GatewayContext } from "../../gateway/context.js";
import type { AgentRecord, ResolvedAgent } from "../../gateway/registry.js";
import { AcpError } from "../../protocol/index.js";
import type { CollabAudit } from "./audit.js";
import type { Action, Intake } from "./intake.js";
import type { KnowledgeIndex } from "./knowledge-index.js";
import type { CreditLedger } from "./credit-ledger.js";
import type { HandoffLimits } from "../../collab/handoff.js";
import type { NegotiationRules } from "../../collab/negotiation.js";
import { type Mutation, mutate, undo } from "./store.js";

/** Everything the collaboration routes share; built once per gateway by `collabExtension`. */
export interface CollabServices {
  ctx: GatewayContext;
  intake: Intake;
  audit: CollabAudit;
  ledger: CreditLedger;
  knowledge: KnowledgeIndex;
  rules: NegotiationRules;
  /** How long offers and accepted tasks live when an offer does not say. */
  handoffLimits: HandoffLimits;
  /** The clock deadlines are measured by (sessions, votes); injectable for tests. */
  now(): Date;
  /** Open status streams, ended when the gateway closes. */
  streams: Set<EventStream>;
  keepAliveMs: number;
}

/** The caller of a read endpoint: an agent (sees what it takes part in) or the admin (sees all). */
export type Reader = { kind: "agent"; agentId: string } | { kind: "admin" };

export async function readerOf(ctx: GatewayContext, req: IncomingMessage): Promise<Reader> {
  const caller = await authenticate(ctx, req);
  return caller.kind === "admin"
    ? { kind: "admin" }
    : { kind: "agent", agentId: caller.agent.record.agentId };
}

/** A registered, not revoked agent, or UnknownRecipient naming where it was named. */
export async function liveAgent(ctx: GatewayContext, agentId: string, path: string): Promise<ResolvedAgent> {
  const agent = await ctx.registry.resolve(agentId);
  if (!agent) {
    throw new AcpError("UnknownRecipient", `no agent ${agentId} is registered here`, {
      problems: [{ path, message: "not a registered agent" }],
    });
  }
  return agent;
}

export function auditParty(record: Pick<AgentRecord, "agentId" | "principalId">): {
  agent: string;
  principal: string;
} {
  return { agent: record.agentId, principal: record.principalId };
}

/**
 * Relays the signed messages that announce a stored change. If the relay refuses (no handshake with
 * that peer, rate limit, storage), the change is undone and the relay's error answers the request:
 * stored state and delivered messages never disagree.
 */
export async function relayOrUndo<T>(
  services: CollabServices,
  caller: ResolvedAgent,
  bucket: KvBucket<T>,
  key: string,
  mutation: Mutation<T>,
  actions: Action<unknown>[],
): Promise<void> {
  try {
    for (const action of actions) await services.intake.relay(caller, action);
  } catch (err) {
    await undo(bucket, key, mutation).catch((undoErr: Error) =>
      services.ctx.logger.error({ err: undoErr.message, key }, "collab: undo after a refused relay failed"),
    );
    throw err;
  }
}

/** Stores a state change, then relays the messages announcing it (see `relayOrUndo`). */
export async function commitAndRelay<T>(
  services: CollabServices,
  caller: ResolvedAgent,
  bucket: KvBucket<T>,
  key: string,
  change: (current: T | undefined) => T,
  actions: Action<unknown>[],
): Promise<Mutation<T>> {
  const mutation = await mutate(bucket, key, change);
  await relayOrUndo(services, caller, bucket, key, mutation, actions);
  return mutation;
}
