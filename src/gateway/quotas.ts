import type { BrokerQuotas } from "../broker/index.js";

/**
 * What one agent, or a stranger, may make the gateway store (docs/security.md, "Quotas"). Each
 * refusal is -32013 RateLimited with `data.quota` naming it, except the storage floor (-32018).
 * 0 turns one off.
 */
export interface GatewayQuotas extends BrokerQuotas {
  /**
   * Largest `agent.announce` / `agent.capabilities` envelope from a sender that has not completed
   * the handshake with its recipient (bytes).
   */
  handshakeBytes?: number;
  /** Free storage (bytes) below which new submissions are refused gateway-wide. */
  storageFloorBytes?: number;
}

const MIB = 1024 * 1024;

/** Far above what an agent in normal use reaches, low enough that one agent cannot fill a disk. */
export const DEFAULT_QUOTAS: Required<GatewayQuotas> = {
  recipientPendingMessages: 100_000,
  recipientPendingBytes: 1024 * MIB,
  senderStoredBytes: 10 * 1024 * MIB,
  handshakeBytes: 64 * 1024,
  storageFloorBytes: 512 * MIB,
};

/** Every quota with its default; 0 (off) stays 0. */
export function resolveGatewayQuotas(given: GatewayQuotas = {}): Required<GatewayQuotas> {
  const resolved = { ...DEFAULT_QUOTAS };
  for (const [name, value] of Object.entries(given) as [keyof GatewayQuotas, number | undefined][]) {
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 0) {
      throw new TypeError(`quotas.${name} must be a whole number of at least 0 (0 turns it off)`);
    }
    resolved[name] = value;
  }
  return resolved;
}

/** The quotas the broker enforces, 0 (off) left out. */
export function brokerQuotasOf(quotas: Required<GatewayQuotas>): BrokerQuotas {
  const { recipientPendingMessages, recipientPendingBytes, senderStoredBytes } = quotas;
  return Object.fromEntries(
    Object.entries({ recipientPendingMessages, recipientPendingBytes, senderStoredBytes }).filter(
      ([, value]) => value > 0,
    ),
  );
}
