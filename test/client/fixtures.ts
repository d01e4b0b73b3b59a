import type { KeyObject } from "node:crypto";
import type { AgentConnection, ConnectionEvents } from "../../src/client/connection.js";
import { GatewayConnection } from "../../src/client/gateway-connection.js";
import { AcpAgent, type AcpAgentOptions } from "../../src/client/index.js";
import type { GatewayOptions } from "../../src/gateway/index.js";
import { verifyEnvelope } from "../../src/protocol/index.js";
import type { TestAgent, TestGateway } from "../helpers/gateway.js";

/** Starts a real gateway; `dataDir` and `port` let a test restart it on the same store and address. */
export type GatewayFactory = (
  options?: Partial<GatewayOptions> & { dataDir?: string },
) => Promise<TestGateway>;

export const SCHEDULING_ANNOUNCE = {
  capabilities: ["calendar-management"],
  purpose: "Coordinate scheduling between principals",
};

/** An AcpAgent for a registered test agent, with its audit log and state under `dir`. */
export function agentFor(
  gw: { url: string },
  agent: TestAgent,
  dir: string,
  options: Partial<AcpAgentOptions> = {},
): AcpAgent {
  return new AcpAgent({
    gateway: gw.url,
    identity: agent.identity,
    apiKey: agent.apiKey,
    announce: SCHEDULING_ANNOUNCE,
    audit: { root: `${dir}/audit` },
    state: { root: `${dir}/state` },
    reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
    requestTimeoutMs: 10_000,
    ...options,
  });
}

/** Resolves when `predicate` holds, polling; fails with `what` after `timeoutMs`. */
export async function eventually(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A promise with its resolve function, for handlers a test releases by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Submissions a gateway answered `duplicate: true` (a resend of a stored message), from its metrics. */
export async function duplicateSubmissions(url: string): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return Number(/^acp_messages_submitted_total\{duplicate="true"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
}

/** Extra hand-outs to the application: the sum over ids of (times handled − 1). */
export function duplicatesIn(handled: ReadonlyMap<string, number>): number {
  let extra = 0;
  for (const times of handled.values()) extra += times - 1;
  return extra;
}

/**
 * An agent's `connection` that marks every delivery verified against `keys`, as a gateway's
 * in-process relay does for its own agents (`verifiedByRelay`): the agent then checks the routing
 * itself, not the signature.
 */
export function relayVerifiedConnection(
  baseUrl: string,
  apiKey: string,
  keys: ReadonlyMap<string, KeyObject>,
): (agentId: string, events: ConnectionEvents) => AgentConnection {
  return (agentId, events) =>
    new GatewayConnection({
      baseUrl,
      apiKey,
      agentId,
      events: {
        ...events,
        message: (frame) =>
          events.message({
            ...frame,
            verifiedByRelay: verifyEnvelope(frame.envelope, { resolveKey: (id) => keys.get(id) }),
          }),
      },
    });
}
