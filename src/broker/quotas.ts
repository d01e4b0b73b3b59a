/**
 * The per-agent quotas both brokers enforce in `submit` (types: `BrokerQuotas`). Each broker keeps
 * the usage (embedded: counters in memory, rebuilt from the database at open; NATS: a KV record
 * per agent shared by every gateway, `nats/usage-ledger.ts`); the decision is made here, in O(1).
 */
import { BrokerError } from "./errors.js";
import type { AgentUsage, BrokerQuotas, QuotaName } from "./types.js";

/** The quotas with every absent one as Infinity. */
export type ResolvedQuotas = Required<BrokerQuotas>;

export const NO_USAGE: Readonly<AgentUsage> = { pendingMessages: 0, pendingBytes: 0, storedBytes: 0 };

/** Validated quotas, or undefined when none is set (the brokers then keep no usage at all). */
export function resolveQuotas(quotas: BrokerQuotas | undefined): ResolvedQuotas | undefined {
  if (!quotas) return undefined;
  const resolved: ResolvedQuotas = {
    recipientPendingMessages: limit(quotas.recipientPendingMessages, "quotas.recipientPendingMessages"),
    recipientPendingBytes: limit(quotas.recipientPendingBytes, "quotas.recipientPendingBytes"),
    senderStoredBytes: limit(quotas.senderStoredBytes, "quotas.senderStoredBytes"),
  };
  return Object.values(resolved).every((value) => value === Number.POSITIVE_INFINITY) ? undefined : resolved;
}

function limit(value: number | undefined, field: string): number {
  if (value === undefined || value === Number.POSITIVE_INFINITY) return Number.POSITIVE_INFINITY;
  if (!Number.isInteger(value) || value < 1) {
    throw new BrokerError("invalid_argument", `${field} must be a positive integer`, { field });
  }
  return value;
}

/** The UTF-8 size the quotas count. */
export function envelopeBytes(envelope: string): number {
  return Buffer.byteLength(envelope);
}

/**
 * Refuses a message of `bytes` from `from` to `to` that would take either past a quota, given
 * what each uses now (counting every message accepted so far, committed or not).
 */
export function checkQuotas(
  quotas: ResolvedQuotas,
  to: string,
  recipient: AgentUsage,
  from: string,
  sender: AgentUsage,
  bytes: number,
): void {
  if (
    recipient.pendingMessages < quotas.recipientPendingMessages &&
    recipient.pendingBytes + bytes <= quotas.recipientPendingBytes &&
    sender.storedBytes + bytes <= quotas.senderStoredBytes
  ) {
    return;
  }
  // Refused: say which quota, in words.
  const [quota, limit, used, situation]: [QuotaName, number, number, string] =
    recipient.pendingMessages >= quotas.recipientPendingMessages
      ? [
          "recipient-pending-messages",
          quotas.recipientPendingMessages,
          recipient.pendingMessages,
          `${to} has ${recipient.pendingMessages} messages waiting`,
        ]
      : recipient.pendingBytes + bytes > quotas.recipientPendingBytes
        ? [
            "recipient-pending-bytes",
            quotas.recipientPendingBytes,
            recipient.pendingBytes,
            `${to} has ${recipient.pendingBytes} bytes waiting and this message is ${bytes}`,
          ]
        : [
            "sender-stored-bytes",
            quotas.senderStoredBytes,
            sender.storedBytes,
            `${from} has ${sender.storedBytes} bytes stored and this message is ${bytes}`,
          ];
  throw new BrokerError("quota", `${situation}: over the ${quota} quota of ${limit}; nothing was stored`, {
    quota: { quota, limit, used },
  });
}
