/**
 * What an `AcpAgent` sends: a request or handoff and the wait for its answer, and a notification.
 * Each handshakes first if needed, and again (once) when the gateway or the peer answers
 * HandshakeRequired (the peer restarted and forgot us); the timeout covers everything, handshake
 * included.
 */
import { AcpError, buildNotification } from "../protocol/index.js";
import type { AgentCore } from "./agent-core.js";
import type { NotifyOptions } from "./types.js";

/** When an exchange gives up, and what it carries besides the message. */
export interface ExchangeOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  summary?: string;
}

/** Request or handoff: handshake if needed, submit, await the correlated response's body. */
export async function exchange(
  core: AgentCore,
  peer: string,
  options: ExchangeOptions,
  build: (core: AgentCore, to: string) => Promise<{ id: string | number; method: string }>,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + options.timeoutMs;
  const signal = options.signal ? { signal: options.signal } : {};
  const remaining = () => Math.max(1, deadline - Date.now());
  for (let attempt = 0; ; attempt++) {
    await core.handshake(peer, { timeoutMs: remaining(), ...signal });
    const message = await build(core, peer);
    const response = core.pending.wait(message.id, peer, {
      method: message.method,
      timeoutMs: remaining(),
      ...signal,
    });
    const submitted = core
      .send(message, peer, { summary: options.summary }, { deadline, ...signal })
      .catch((err: unknown) => {
        core.pending.drop(message.id);
        throw err;
      });
    try {
      const outcome = await Promise.race([response, submitted.then(() => response)]);
      if ("error" in outcome) throw outcome.error;
      return outcome.body;
    } catch (err) {
      if (!retryAfterHandshakeLoss(core, err, peer, attempt)) throw err;
    }
  }
}

/**
 * A one-way notification: handshake if needed, submit (resent as needed until the deadline), its
 * message id once the gateway accepted it.
 */
export async function notify(
  core: AgentCore,
  to: string,
  body: Record<string, unknown>,
  options: NotifyOptions & { timeoutMs: number },
): Promise<{ id: string }> {
  const deadline = Date.now() + options.timeoutMs;
  const signal = options.signal ? { signal: options.signal } : {};
  for (let attempt = 0; ; attempt++) {
    await core.handshake(to, { timeoutMs: Math.max(1, deadline - Date.now()), ...signal });
    const outgoing = options.encrypt ? await core.encryptFor(to, body) : body;
    const message = buildNotification(core.self, to, outgoing, {
      method: options.method ?? "agent.notification",
    });
    try {
      const sent = await core.send(message, to, { summary: options.summary }, { deadline, ...signal });
      return { id: sent.id };
    } catch (err) {
      if (!retryAfterHandshakeLoss(core, err, to, attempt)) throw err;
    }
  }
}

/** The first HandshakeRequired of a send forgets the handshake with `peer`, so the retry makes a new one. */
function retryAfterHandshakeLoss(core: AgentCore, err: unknown, peer: string, attempt: number): boolean {
  if (attempt > 0 || !(err instanceof AcpError) || err.kind !== "HandshakeRequired") return false;
  core.handshakes.reset(peer);
  return true;
}
