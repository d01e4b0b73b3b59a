import type { AgentRecord, Registry, ResolvedAgent } from "./registry.js";

interface Held {
  keyHash: string;
  close: (reason: string) => void;
}

/**
 * What an agent's API key opened and keeps open: its WebSocket, MCP sessions (Streamable HTTP and
 * legacy SSE), event streams and streamed answers. Rotating the key (`POST /agents/:id/rotate`,
 * the remedy for a leaked key) or revoking the agent closes every one of them: here before the
 * rotation is answered, at the other gateways sharing the registry as soon as its watch tells
 * them. A new key opens new ones; the gateway's in-process agents hold no key and are not tracked.
 */
export class OpenedByKey {
  readonly #held = new Map<string, Set<Held>>();

  constructor(private readonly registry: Registry) {
    registry.onChange((agentId, record) => this.#changed(agentId, record));
  }

  /** Things held open, for monitoring and leak checks. */
  get size(): number {
    let size = 0;
    for (const held of this.#held.values()) size += held.size;
    return size;
  }

  /**
   * Calls `close` (once) when the key `agent` authenticated with stops being its key. Returns the
   * function to call when the thing closes by itself.
   */
  track(agent: ResolvedAgent, close: (reason: string) => void): () => void {
    const { agentId, apiKeyHash } = agent.record;
    const held: Held = { keyHash: apiKeyHash, close };
    let all = this.#held.get(agentId);
    if (!all) {
      all = new Set();
      this.#held.set(agentId, all);
    }
    all.add(held);
    // A change that came between the authentication and now was told before this was held.
    this.registry.get(agentId).then(
      (record) => this.#check(agentId, held, record ?? null),
      () => undefined, // the store did not answer: the watch still tells of any change
    );
    return () => this.#release(agentId, held);
  }

  #changed(agentId: string, record: AgentRecord | null): void {
    for (const held of [...(this.#held.get(agentId) ?? [])]) this.#check(agentId, held, record);
  }

  #check(agentId: string, held: Held, record: AgentRecord | null): void {
    if (record && !record.revokedAt && record.apiKeyHash === held.keyHash) return;
    if (!this.#release(agentId, held)) return;
    held.close(record && !record.revokedAt ? "the API key was rotated" : "the agent was revoked");
  }

  #release(agentId: string, held: Held): boolean {
    const all = this.#held.get(agentId);
    if (!all?.delete(held)) return false;
    if (all.size === 0) this.#held.delete(agentId);
    return true;
  }
}
