import { z } from "zod";

/**
 * Federation addresses (docs/federation.md): an agent of another gateway is `agent-id@domain`,
 * where `domain` is the federation name of the agent's home gateway. Local agent ids are unchanged;
 * a message between two domains carries both agents' addresses in its signed headers.
 */

const AGENT_ID = "[A-Za-z0-9][A-Za-z0-9_-]{0,127}";
/** A DNS label: letters, digits and inner hyphens, 1-63 characters. */
const LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const DOMAIN = `${LABEL}(?:\\.${LABEL})*`;

/** The longest federation domain: its outbound queue's name (`_fed_<domain>`) must fit an inbox name. */
export const MAX_DOMAIN_CHARS = 120;

/** A gateway's federation name: a lowercase DNS name of at most 120 characters. */
export const FederationDomain = z
  .string()
  .max(MAX_DOMAIN_CHARS, `must be at most ${MAX_DOMAIN_CHARS} characters`)
  .regex(new RegExp(`^${DOMAIN}$`), "must be a lowercase DNS name such as b.example");

const ADDRESS = new RegExp(`^${AGENT_ID}@(?=.{1,${MAX_DOMAIN_CHARS}}$)${DOMAIN}$`);

/** `agent-id@domain`: an agent of the gateway whose federation name is `domain`. */
export const AgentAddress = z
  .string()
  .regex(ADDRESS, "must be agent-id@domain, e.g. beta@b.example (domain lowercase)");

/**
 * What the `agent-id` and `recipient-id` headers hold: a local agent id, or an address when the
 * message crosses from one gateway's domain to another's.
 */
export const AgentRef = z
  .string()
  .regex(
    new RegExp(`^${AGENT_ID}(?:@(?=.{1,${MAX_DOMAIN_CHARS}}$)${DOMAIN})?$`),
    "must be an agent id (1-128 characters of A-Z a-z 0-9 _ - starting alphanumeric) or agent-id@domain",
  );

export type FederationDomain = z.infer<typeof FederationDomain>;
export type AgentAddress = z.infer<typeof AgentAddress>;

/** The agent id of an address (`beta@b.example` → `beta`); an agent id is its own local part. */
export function localPartOf(ref: string): string {
  const at = ref.indexOf("@");
  return at === -1 ? ref : ref.slice(0, at);
}

/** The domain of an address, or undefined for a local agent id. */
export function domainOf(ref: string): string | undefined {
  const at = ref.indexOf("@");
  return at === -1 ? undefined : ref.slice(at + 1);
}

/** `agentId@domain`. */
export function addressOf(agentId: string, domain: string): string {
  return `${agentId}@${domain}`;
}

/**
 * A principal as a message between two domains names it: its home domain after an `@`, so it is
 * never taken for a principal of the receiving organization (a principal id may contain `@` itself;
 * the domain is always after the last one).
 */
export function qualifiedPrincipal(principalId: string, domain: string): string {
  return `${principalId}@${domain}`;
}

/**
 * Whether `ref` names an agent of another gateway than the one whose federation domain is `ownDomain`
 * (undefined: a gateway that does not federate, for which every address is another gateway's).
 */
export function isRemoteRef(ref: string, ownDomain: string | undefined): boolean {
  const domain = domainOf(ref);
  return domain !== undefined && domain !== ownDomain;
}
