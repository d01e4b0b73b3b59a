import { AcpError, type MethodMessage, type VerifiedEnvelope } from "../protocol/index.js";
import type { AgentCore } from "./agent-core.js";
import type { NewMessageFrame } from "./connection.js";

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
    if (await this.core.recoverHandshake(peer).catch(() => false)) {
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
