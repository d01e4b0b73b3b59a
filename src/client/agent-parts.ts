/**
 * The parts an `AcpAgent` is assembled from when it connects, made from its options: the
 * connection to the gateway (or the one the options supply) and the core, with the handshakes and
 * delivery ledger it keeps under the agent's state directory.
 */
import type { PrivateIdentity } from "../protocol/index.js";
import { AgentCore } from "./agent-core.js";
import type { AgentCoreDeps } from "./agent-core-deps.js";
import type { AgentConnection, ConnectionEvents } from "./connection.js";
import { GatewayConnection } from "./gateway-connection.js";
import { HandshakeStore } from "./handshake-store.js";
import { DeliveryLedger } from "./ledger.js";
import { agentCoreSettings, maxAckPendingOf } from "./options.js";
import { resolveStateRoot } from "./state-dir.js";
import type { AcpAgentOptions } from "./types.js";

/** The agent's link to `gateway`: a `GatewayConnection`, unless the options supply their own. */
export function openConnection(
  gateway: string,
  options: AcpAgentOptions,
  agentId: string,
  events: ConnectionEvents,
): AgentConnection {
  if (options.connection) return options.connection(agentId, events);
  return new GatewayConnection({
    baseUrl: gateway,
    apiKey: options.apiKey,
    agentId,
    ...(options.reconnect ? { reconnect: options.reconnect } : {}),
    ...(options.submitRetry ? { submitRetry: options.submitRetry } : {}),
    maxAckPending: maxAckPendingOf(options),
    consume: options.consume ?? "all",
    events,
  });
}

/** Where the agent's state is kept (undefined with `state: false`). */
export function stateRootOf(options: AcpAgentOptions): string | undefined {
  return options.state === false ? undefined : resolveStateRoot(options.state?.root);
}

/**
 * The agent's core: its settings from the options, its handshakes and handled deliveries kept
 * under `root` (in memory only without one).
 */
export function createCore(
  options: AcpAgentOptions,
  identity: PrivateIdentity,
  root: string | undefined,
  services: Omit<AgentCoreDeps, "identity" | "settings" | "handshakeStore" | "ledger">,
): AgentCore {
  const settings = agentCoreSettings(options, identity);
  return new AgentCore({
    identity,
    settings,
    ...services,
    handshakeStore: root === undefined ? undefined : new HandshakeStore(root, identity.agentId),
    ledger: new DeliveryLedger({
      retentionMs: settings.replayWindowMs,
      ...(root === undefined ? {} : { persist: { root, agentId: identity.agentId } }),
      ...(options.handledStore ? { store: options.handledStore } : {}),
    }),
  });
}
