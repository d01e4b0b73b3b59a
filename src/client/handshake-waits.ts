import type { Handshakes, PeerHandshake } from "../handshake/index.js";
import type { TrustLedger } from "../identity/index.js";
import { AcpError } from "../protocol/index.js";

/**
 * Callers waiting for a handshake to be established: each woken when the inbound pipeline reports
 * the handshake with its peer complete, or failed at its deadline (a timeout the trust ledger
 * observes) or when its signal aborts.
 */
export class HandshakeWaits {
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(
    private readonly handshakes: Handshakes,
    private readonly trust: TrustLedger,
  ) {}

  /** Wakes whoever waits for `peer`, once its handshake is established. */
  progressed(peer: string): void {
    if (!this.handshakes.isEstablished(peer)) return;
    for (const wake of this.waiting.get(peer) ?? []) wake();
    this.waiting.delete(peer);
  }

  /** Resolves once the handshake with `peer` is established; rejects at `timeoutMs` or on abort. */
  established(peer: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<PeerHandshake> {
    return new Promise((resolve, reject) => {
      const waiters = this.waiting.get(peer) ?? new Set();
      this.waiting.set(peer, waiters);
      const fail = (err: AcpError) => {
        waiters.delete(wake);
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        // The handshake stays where it is: our announce is queued at the gateway and the peer answers
        // it when it comes online. Forgetting it here would make us answer the peer's reply with a
        // second announce, which the peer (still holding our first) takes for a new handshake.
        reject(err);
      };
      const wake = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        resolve(this.handshakes.get(peer));
      };
      const onAbort = () => fail(new AcpError("Cancelled", `the handshake with ${peer} was cancelled`));
      const timer = setTimeout(() => {
        const state = this.handshakes.get(peer).state;
        this.trust.observe(peer, "timeout");
        fail(
          new AcpError(
            "Timeout",
            `the handshake with ${peer} did not complete within ${options.timeoutMs} ms`,
            {
              peer,
              state,
            },
          ),
        );
      }, options.timeoutMs);
      waiters.add(wake);
      if (options.signal?.aborted) onAbort();
      else options.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
