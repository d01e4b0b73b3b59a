/**
 * How ACP agents are published to A2A clients (docs/a2a.md), shared by the gateway's A2A bridge
 * and the CLI that registers agents.
 */

/** The capability an agent registers to be published as an A2A agent (`acp agent register --a2a`). */
export const A2A_CAPABILITY = "a2a";
export const A2A_BASE_PATH = "/a2a";

/** The agent's A2A JSON-RPC endpoint; its card is at `<this>/.well-known/agent-card.json`. */
export const a2aAgentBaseUrl = (gatewayUrl: string, agentId: string): string =>
  `${gatewayUrl}${A2A_BASE_PATH}/${encodeURIComponent(agentId)}`;
