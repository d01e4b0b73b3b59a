import {
  AcpError,
  type AcpMessage,
  addressOf,
  domainOf,
  isRemoteRef,
  localPartOf,
  qualifiedPrincipal,
} from "../protocol/index.js";
import { headerPointer } from "../protocol/validate.js";
import type { Registry, ResolvedAgent } from "./registry.js";

/**
 * How the relay reads the two agents a message names, local ids or federation addresses
 * (docs/federation.md): who it must say sent it, and where it goes.
 */

/** The `agent-id` and `principal-id` a message must carry to be accepted from `sender`. */
export interface SenderNames {
  agentId: string;
  principalId: string;
}

/**
 * What a local agent's message must call it: its id and registered principal, or, when the
 * recipient is named by an address (an agent of another domain, or of this one written in full),
 * its own address and its principal qualified with this gateway's domain. A message that arrived
 * from a peer gateway names the sender as its home directory does (`sender.record` holds both).
 */
export function senderNames(
  sender: ResolvedAgent,
  recipientRef: string,
  registry: Registry,
  message: AcpMessage,
  arrived: boolean,
): SenderNames {
  const { agentId, principalId } = sender.record;
  if (arrived || domainOf(recipientRef) === undefined) return { agentId, principalId };
  const own = registry.remote?.domain;
  if (own === undefined) throw noFederation(recipientRef, message);
  return { agentId: addressOf(agentId, own), principalId: qualifiedPrincipal(principalId, own) };
}

/** The recipient of a message, and the broker inbox it waits in here. */
export interface Route {
  recipient: ResolvedAgent;
  inbox: string;
}

/**
 * A local agent (named by its id, or by its address at this gateway's domain), or an agent of
 * another domain this gateway forwards to (its domain's outbound queue). A message that arrived from
 * a peer is delivered to a local agent only: a gateway never relays between two other domains.
 */
export async function routeOf(
  to: string,
  registry: Registry,
  message: AcpMessage,
  arrived: boolean,
): Promise<Route> {
  const domain = domainOf(to);
  const remote = registry.remote;
  if (domain !== undefined && domain !== remote?.domain) {
    if (arrived) {
      throw new AcpError("Misrouted", `this gateway delivers only to its own agents, not to ${domain}`, {
        problems: [
          { path: headerPointer(message, "recipient-id"), message: `not an agent of ${remote?.domain}` },
        ],
      });
    }
    if (!remote) throw noFederation(to, message);
    const recipient = await remote.recipient(to);
    return { recipient, inbox: recipient.inbox };
  }
  const agentId = localPartOf(to);
  const recipient = await registry.resolve(agentId);
  if (!recipient) {
    throw new AcpError("UnknownRecipient", `no agent ${to} is registered here`, {
      problems: [{ path: headerPointer(message, "recipient-id"), message: "not a registered agent" }],
    });
  }
  return { recipient, inbox: agentId };
}

function noFederation(ref: string, message: AcpMessage): AcpError {
  return new AcpError(
    "UnknownRecipient",
    `${ref} is an agent of another gateway, and this gateway does not federate (no federation domain)`,
    { problems: [{ path: headerPointer(message, "recipient-id"), message: "federation is off here" }] },
  );
}

/**
 * Whether `ref` is an address of another domain: an agent of a peer gateway, which a bridge (A2A,
 * MCP) reaches through federation like any agent here. Its presence is not known here.
 */
export function isRemoteAddress(ref: string, registry: Registry): boolean {
  return isRemoteRef(ref, registry.remote?.domain);
}

/**
 * The agent a bridge's caller names: a live agent here, or an agent of another domain from its home
 * gateway's signed directory (undefined when federation is off, the domain is not a peer, or it has
 * no such agent: a bridge answers those as any unknown agent).
 */
export async function reachableAgent(ref: string, registry: Registry): Promise<ResolvedAgent | undefined> {
  if (!isRemoteAddress(ref, registry)) return registry.resolve(localPartOf(ref));
  return registry.remote?.recipient(ref).catch(() => undefined);
}
