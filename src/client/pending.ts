import { AcpError } from "../protocol/index.js";

export type Outcome = { body: Record<string, unknown>; encrypted: boolean } | { error: AcpError };

interface Entry {
  peer: string;
  method: string;
  resolve(outcome: Outcome): void;
  reject(err: AcpError): void;
  cleanup(): void;
}

/**
 * Requests this agent sent and whose responses it awaits, keyed by JSON-RPC id. They live in memory
 * independently of the WebSocket, so a reconnect does not lose them: the response simply arrives
 * later. Each ends by its response, its timeout, its abort signal, or the agent closing.
 */
export class PendingRequests {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly onTimeout: (peer: string) => void) {}

  /** Registers before the request is submitted, so an early response is never missed. */
  wait(
    id: string | number,
    peer: string,
    options: { method: string; timeoutMs: number; signal?: AbortSignal },
  ): Promise<Outcome> {
    const key = String(id);
    return new Promise<Outcome>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.entries.delete(key);
        this.onTimeout(peer);
        reject(
          new AcpError(
            "Timeout",
            `no response from ${peer} to ${options.method} within ${options.timeoutMs} ms`,
            {
              peer,
              id,
            },
          ),
        );
      }, options.timeoutMs);
      const onAbort = () => {
        this.entries.delete(key);
        cleanup();
        reject(new AcpError("Cancelled", `the ${options.method} to ${peer} was cancelled`, { peer, id }));
      };
      const cleanup = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
      };
      if (options.signal?.aborted) {
        cleanup();
        reject(new AcpError("Cancelled", `the ${options.method} to ${peer} was cancelled`, { peer, id }));
        return;
      }
      options.signal?.addEventListener("abort", onAbort, { once: true });
      this.entries.set(key, {
        peer,
        method: options.method,
        resolve: (outcome) => {
          cleanup();
          resolve(outcome);
        },
        reject: (err) => {
          cleanup();
          reject(err);
        },
        cleanup,
      });
    });
  }

  /** True when `id` is awaited from `from`: a response from anyone else is not ours to accept. */
  expects(id: string | number | null, from: string): boolean {
    return id !== null && this.entries.get(String(id))?.peer === from;
  }

  settle(id: string | number, outcome: Outcome): void {
    const key = String(id);
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    entry.resolve(outcome);
  }

  /** Stops waiting for `id` (its submission failed). */
  drop(id: string | number): void {
    const key = String(id);
    this.entries.get(key)?.cleanup();
    this.entries.delete(key);
  }

  rejectAll(err: AcpError): void {
    for (const entry of this.entries.values()) entry.reject(err);
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
