import { setTimeout as sleep } from "node:timers/promises";
import { AcpError, type MethodMessage, type VerifiedEnvelope } from "../protocol/index.js";
import type { AgentCore } from "./agent-core.js";
import type { NewMessageFrame } from "./connection.js";
import { isGatewayTrouble } from "./health.js";
import { backoffDelay } from "./outbox.js";

/** How long the gateway's copy of a peer's side is asked for while the gateway is in trouble. */
const GATEWAY_COPY_PATIENCE_MS = 30_000;

/** A verified delivery waiting for a handshake with its sender. */
export interface HeldDelivery {
  frame: NewMessageFrame;
  verified: VerifiedEnvelope;
  message: MethodMessage;
}

/**
 * A substantive message from a peer this agent has no completed handshake with — the sender
 * completed one, so the gateway relayed it, but this agent lost its record (it runs in another
 * directory or on another machine, or with `state: false`) — is not refused: it is held,
 * unacknowledged, while the agent re-establishes the handshake, and then goes through the gate
 * again. Later messages from that sender wait behind it, so their order holds.
 *
 * First from the gateway's copy of the sender's side (its signed announce and capabilities, which
 * this agent verifies against the sender's key, as it does its own saved ones): at once, whether
 * or not the sender is online. Failing that (a gateway that has no copy), by a fresh handshake: the
 * agent announces, and a sender that is offline answers when it comes back (the announce waits at
 * the gateway). That wait is bounded by `handshakeWaitMs`; past it, `release` is told the
 * handshake failed, and the held messages are refused with -32004 naming the sender.
 */
export class HandshakeRecovery {
  private readonly held = new Map<string, HeldDelivery[]>();
  private readonly stopped = new AbortController();

  constructor(
    private readonly core: AgentCore,
    /** Called once the handshake with `peer` completed (failure undefined) or failed; then `take(peer)`. */
    private readonly release: (peer: string, failure: AcpError | undefined) => void,
  ) {}

  /** True while `peer`'s messages are held: a new one from it is held too, behind them. */
  holds(peer: string): boolean {
    return this.held.has(peer);
  }

  hold(peer: string, delivery: HeldDelivery): void {
    const waiting = this.held.get(peer);
    if (waiting) {
      waiting.push(delivery);
      return;
    }
    this.held.set(peer, [delivery]);
    void this.recover(peer);
  }

  /** The gateway's copy of the peer's side first; else a fresh handshake, which the peer answers. */
  private async recover(peer: string): Promise<void> {
    // Only the agent closing (the pause aborted) rejects it; nothing is released then.
    if (await this.fromGatewayCopy(peer).catch(() => false)) {
      if (!this.stopped.signal.aborted) this.release(peer, undefined);
      return;
    }
    if (this.stopped.signal.aborted) return;
    const waitMs = this.core.settings.handshakeWaitMs;
    this.core.handshake(peer, { timeoutMs: waitMs, signal: this.stopped.signal }).then(
      () => this.release(peer, undefined),
      (err: Error) => {
        if (this.stopped.signal.aborted) return;
        this.release(
          peer,
          new AcpError(
            "HandshakeRequired",
            `${this.core.self.agentId} had no handshake with ${peer} and ${peer} did not complete a new one within ${waitMs} ms: ${err.message}`,
            { peer, waitedMs: waitMs },
          ),
        );
      },
    );
  }

  /**
   * Re-establishes the handshake from the gateway's copy of `peer`'s side. A gateway in trouble
   * (a 503 during a NATS election) is asked again, with the SDK's backoff (250 ms doubling to
   * 4 s, jittered), for up to GATEWAY_COPY_PATIENCE_MS: a fresh announce instead would reset the
   * pair at the gateway, and a sender that is offline (or does not answer handshakes) would then
   * be refused until it handshakes again. False when the gateway has no usable copy.
   */
  private async fromGatewayCopy(peer: string): Promise<boolean> {
    const giveUpAt = Date.now() + Math.min(GATEWAY_COPY_PATIENCE_MS, this.core.settings.handshakeWaitMs);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.core.recoverHandshake(peer);
      } catch (err) {
        const delayMs = backoffDelay(attempt, 250, 4_000);
        if (!isGatewayTrouble(err) || Date.now() + delayMs > giveUpAt) return false;
        // Rejects (AbortError) when the agent closes: the held messages are given back then.
        await sleep(delayMs, undefined, { signal: this.stopped.signal });
      }
    }
  }

  /** The held messages of `peer`, in arrival order; they are no longer held. */
  take(peer: string): HeldDelivery[] {
    const waiting = this.held.get(peer) ?? [];
    this.held.delete(peer);
    return waiting;
  }

  /** Stops waiting (the agent is closing) and returns every held message: the gateway redelivers them. */
  abandon(): HeldDelivery[] {
    this.stopped.abort();
    const all = [...this.held.values()].flat();
    this.held.clear();
    return all;
  }
}
