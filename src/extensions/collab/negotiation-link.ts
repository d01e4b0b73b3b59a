/**
 * Negotiations between agents of different domains (docs/federation.md, "What works across the
 * link"). Each party's gateway keeps a copy of the session and applies the same pure transitions
 * (collab/negotiation.ts) to the same signed messages: its own agent's moves when they come through
 * its routes, the other party's when they arrive over the federation link (verified against that
 * agent's key from its home directory). Both copies therefore hold the same rounds, hash chain and,
 * once accepted, the same agreement both parties signed. Parties are named by address.
 */
import type { KvBucket } from "../../broker/index.js";
import type { ArrivalCheck } from "../../gateway/relay-types.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import { type AgreementParty, partyOf } from "../../collab/agreement.js";
import { AcceptBody, CollabMethod, OfferBody, RejectBody } from "../../collab/messages.js";
import {
  accept,
  counter,
  isParty,
  type NegotiationSession,
  reject,
  startSession,
} from "../../collab/negotiation.js";
import { conflict, notFound, parseOrThrow } from "../../collab/util.js";
import {
  AcpError,
  addressOf,
  domainOf,
  isRemoteRef,
  localPartOf,
  qualifiedPrincipal,
} from "../../protocol/index.js";
import { reachableAgent } from "../../gateway/addressing.js";
import type { CollabServices } from "./services.js";
import { mutate } from "./store.js";

export const negotiationKey = (sessionId: string) => `s.${sessionId}`;

/** The party record of a local agent as a negotiation with an agent of another domain names it. */
function addressedParty(agent: ResolvedAgent, domain: string): AgreementParty {
  const { record } = agent;
  return partyOf({
    ...record,
    agentId: addressOf(record.agentId, domain),
    principalId: qualifiedPrincipal(record.principalId, domain),
  });
}

/**
 * The two parties of a proposal `caller` makes to `recipient`: both by id between agents here, both
 * by address when the recipient is an agent of another domain (from its home directory).
 */
export async function partiesOf(
  services: CollabServices,
  caller: ResolvedAgent,
  recipient: string,
): Promise<{ proposer: AgreementParty; responder: AgreementParty }> {
  const { registry } = services.ctx;
  const domain = registry.remote?.domain;
  if (domain === undefined || !isRemoteRef(recipient, domain))
    return {
      proposer: partyOf(caller.record),
      responder: partyOf((await localParty(services, recipient)).record),
    };
  const remote = await reachableAgent(recipient, registry);
  if (!remote) {
    throw new AcpError("UnknownRecipient", `${recipient} is not an agent this gateway can reach`, {
      problems: [{ path: "/params/headers/recipient-id", message: "not an agent of a peer domain" }],
    });
  }
  return { proposer: addressedParty(caller, domain), responder: partyOf(remote.record) };
}

async function localParty(services: CollabServices, ref: string): Promise<ResolvedAgent> {
  const agent = await services.ctx.registry.resolve(localPartOf(ref));
  if (!agent) {
    throw new AcpError("UnknownRecipient", `no agent ${ref} is registered here`, {
      problems: [{ path: "/params/headers/recipient-id", message: "not a registered agent" }],
    });
  }
  return agent;
}

/** What `agentId` (an agent here) is called in `session`: its id, or its address; undefined if no party. */
export function sideOf(
  session: NegotiationSession,
  agentId: string,
  domain: string | undefined,
): string | undefined {
  if (isParty(session, agentId)) return agentId;
  const address = domain === undefined ? undefined : addressOf(agentId, domain);
  return address !== undefined && isParty(session, address) ? address : undefined;
}

/** Whether `session` already holds the move signed as message `id` (a transfer forwarded twice). */
function holds(session: NegotiationSession, id: string): boolean {
  return (
    session.rounds.some((r) => r.messageId === id) ||
    session.acceptance?.messageId === id ||
    session.rejection?.messageId === id
  );
}

const METHODS = new Set<string>([
  CollabMethod.propose,
  CollabMethod.counter,
  CollabMethod.accept,
  CollabMethod.reject,
]);

/**
 * Applies a negotiation move that arrived from a peer gateway to this gateway's copy of the session
 * (a proposal creates it), or refuses it: a move the session does not allow, or an agreement
 * signature that does not verify against the sender's key from its home directory, is refused with
 * the same error a local party would get, and the copy is unchanged.
 */
export function negotiationArrivals(
  services: CollabServices,
  bucket: KvBucket<NegotiationSession>,
): ArrivalCheck {
  return async ({ sender, message, headers }) => {
    if (!("method" in message) || !METHODS.has(message.method) || !("params" in message)) return;
    const domain = services.ctx.registry.remote?.domain;
    if (domain === undefined) return;
    const method = message.method;
    const from = sender.record.agentId;
    const envelope = message as unknown as Record<string, unknown>;
    const now = services.now();
    const raw = message.params.body;
    if (method === CollabMethod.propose) {
      const body = parseOrThrow(OfferBody, raw, `${method} body`, "/params/body");
      if (!body.sessionId.startsWith(`${localPartOf(from)}.`)) {
        throw new AcpError(
          "InvalidParams",
          `negotiation id ${body.sessionId} is not in ${from}'s namespace`,
          {
            problems: [{ path: "/params/body/sessionId", message: `must start with ${localPartOf(from)}.` }],
          },
        );
      }
      const responder = addressedParty(await localParty(services, headers["recipient-id"]), domain);
      const proposer = partyOf(sender.record);
      await mutate(bucket, negotiationKey(body.sessionId), (current) => {
        if (current && holds(current, headers["message-id"])) return current;
        if (current) throw conflict(`negotiation ${body.sessionId} already exists`);
        return startSession(proposer, responder, body, headers, envelope, services.rules, now);
      });
      record(services, method, sender, headers, body.sessionId);
      return;
    }
    const sessionId = (raw as { sessionId?: unknown } | undefined)?.sessionId;
    if (typeof sessionId !== "string") return; // the body's schema below names what is missing
    await mutate(bucket, negotiationKey(sessionId), (current) => {
      if (!current || !isParty(current, from) || domainOf(from) === undefined)
        throw notFound("negotiation", sessionId);
      if (holds(current, headers["message-id"])) return current;
      const step =
        method === CollabMethod.counter
          ? counter(
              current,
              from,
              parseOrThrow(OfferBody, raw, `${method} body`, "/params/body"),
              headers,
              envelope,
              now,
            )
          : method === CollabMethod.accept
            ? accept(
                current,
                from,
                parseOrThrow(AcceptBody, raw, `${method} body`, "/params/body"),
                headers,
                now,
              )
            : reject(
                current,
                from,
                parseOrThrow(RejectBody, raw, `${method} body`, "/params/body"),
                headers,
                now,
              );
      if (step.refusal) throw step.refusal;
      return step.next;
    });
    record(services, method, sender, headers, sessionId);
  };
}

/** The collaboration audit's entry for a move from another domain, as for a local party's. */
function record(
  services: CollabServices,
  method: string,
  sender: ResolvedAgent,
  headers: { "message-id": string; "recipient-id": string },
  sessionId: string,
): void {
  services.audit.record({
    method,
    from: { agent: sender.record.agentId, principal: sender.record.principalId },
    to: { agent: headers["recipient-id"], principal: null },
    id: sessionId,
    messageId: headers["message-id"],
    summary: `${sender.record.agentId}: ${method.replace("agent.negotiation.", "")} in negotiation ${sessionId}, verified against its home directory's key`,
  });
}
