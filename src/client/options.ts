import type { PrivateIdentity } from "../protocol/index.js";
import { AcpError, AgentRef } from "../protocol/index.js";
import type { AgentCoreSettings } from "./agent-core-deps.js";
import type { AcpAgentOptions } from "./types.js";

/** The most unacknowledged deliveries a gateway sends one agent (its `maxInFlight`). */
const MAX_ACK_PENDING = 256;

/** The gateway keeps messages 7 days; allow that plus clock skew for an offline queue. */
const DEFAULT_REPLAY_WINDOW_MS = 7 * 24 * 3_600_000 + 5 * 60_000;

/**
 * A message from a peer this agent has no handshake with waits this long for a new one: inside the
 * gateway's default delivery budget (30 s, then doubling, 6 deliveries: about 15 minutes).
 */
const DEFAULT_HANDSHAKE_WAIT_MS = 10 * 60_000;

/** The options with their defaults filled in, once the identity is known. */
export function agentCoreSettings(options: AcpAgentOptions, identity: PrivateIdentity): AgentCoreSettings {
  return {
    layers: options.layers ?? [0, 1],
    announce: options.announce ?? {
      capabilities: [],
      purpose: `ACP agent ${identity.agentId} acting for ${identity.principalId}`,
    },
    capabilities: options.capabilities ?? { tools: [], domains: [], limits: [], requests: [] },
    replayWindowMs: options.replayWindowMs ?? DEFAULT_REPLAY_WINDOW_MS,
    undeclaredLayers: options.undeclaredLayers ?? "decline",
    consume: options.consume ?? "all",
    concurrency: options.flow?.concurrency ?? DEFAULT_CONCURRENCY,
    handshakeWaitMs: options.handshakeWaitMs ?? DEFAULT_HANDSHAKE_WAIT_MS,
  };
}

/** Flow control defaults: handlers at once, and deliveries held ready behind them. */
export const DEFAULT_CONCURRENCY = 32;
export const DEFAULT_PREFETCH = 32;

/** The socket's window (`maxAckPending`): what the handlers can start plus the prefetch. */
export function maxAckPendingOf(options: AcpAgentOptions): number {
  return (options.flow?.concurrency ?? DEFAULT_CONCURRENCY) + (options.flow?.prefetch ?? DEFAULT_PREFETCH);
}

/** Refuses options that cannot work, naming the option (the constructor's first step after the URL). */
export function checkOptions(options: AcpAgentOptions): void {
  if (typeof options.apiKey !== "string" || options.apiKey === "") {
    throw invalidOption("apiKey", "is required (the key the gateway issued at registration)");
  }
  if ((options.identity === undefined) === (options.keyFile === undefined)) {
    throw invalidOption("identity", "give exactly one of identity and keyFile");
  }
  for (const [i, layer] of (options.layers ?? []).entries()) {
    if (!Number.isInteger(layer) || layer < 0)
      throw invalidOption(`layers/${i}`, "must be a non-negative integer");
  }
  const { concurrency, prefetch } = options.flow ?? {};
  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency >= 1))
    throw invalidOption("flow/concurrency", "must be an integer of at least 1");
  if (prefetch !== undefined && !(Number.isInteger(prefetch) && prefetch >= 0))
    throw invalidOption("flow/prefetch", "must be a non-negative integer");
  if (maxAckPendingOf(options) > MAX_ACK_PENDING)
    throw invalidOption(
      "flow",
      `concurrency + prefetch must be at most ${MAX_ACK_PENDING} (the gateway's limit)`,
    );
  const wait = options.handshakeWaitMs;
  if (wait !== undefined && !(Number.isFinite(wait) && wait > 0)) {
    throw invalidOption("handshakeWaitMs", "must be a positive number of milliseconds");
  }
  const store = options.handledStore;
  if (store !== undefined && (typeof store?.get !== "function" || typeof store.record !== "function")) {
    throw invalidOption("handledStore", "must have get(messageId) and record(messageId, record) methods");
  }
  const { maxAttempts, initialDelayMs, maxDelayMs } = options.submitRetry ?? {};
  if (
    maxAttempts !== undefined &&
    !(maxAttempts === Infinity || (Number.isInteger(maxAttempts) && maxAttempts >= 1))
  )
    throw invalidOption("submitRetry/maxAttempts", "must be an integer of at least 1, or Infinity");
  for (const [name, value] of Object.entries({ initialDelayMs, maxDelayMs })) {
    if (value !== undefined && !(Number.isFinite(value) && value >= 0))
      throw invalidOption(`submitRetry/${name}`, "must be a non-negative number of milliseconds");
  }
}

export function invalidOption(path: string, message: string): AcpError {
  return new AcpError("InvalidParams", `AcpAgent option ${path} ${message}`, {
    problems: [{ path: `/${path}`, message }],
  });
}

/** A peer: an agent id, or an agent of another gateway's domain (`agent-id@domain`). */
export function checkPeer(peer: string): string {
  const parsed = AgentRef.safeParse(peer);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", `peer ${JSON.stringify(peer)} is not an agent id or address`, {
      problems: [{ path: "/peer", message: parsed.error.issues[0]?.message ?? "invalid" }],
    });
  }
  return peer;
}

export function checkBody(body: unknown): void {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new AcpError("InvalidParams", "a message body must be a JSON object", {
      problems: [{ path: "/params/body", message: "must be a JSON object" }],
    });
  }
}
