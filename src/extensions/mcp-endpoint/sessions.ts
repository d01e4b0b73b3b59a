/**
 * The MCP sessions open at the gateway: each bound to the agent whose API key opened it, each with
 * its own SDK server and transport, each closed after `idleMs` without traffic (a request from the
 * client or a message to it). Closing frees everything the session holds: the transport and its
 * streams, the server (whose runs are aborted), resource watchers, the idle timer.
 */
import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";
import { authenticateAgent, type GatewayContext } from "../../gateway/context.js";
import type { OpenedByKey } from "../../gateway/opened-by-key.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import type { Transport } from "../../mcp/sdk-adapter.js";
import type { ResourceSubscriptions } from "../../mcp/subscriptions.js";
import { AcpError } from "../../protocol/index.js";
import { mcpUnauthorized } from "./no-oauth.js";

export type McpSessionKind = "streamable" | "sse";

/**
 * Who the session acts for, refreshed by every authenticated request. The session ends when the
 * key that opened it is rotated or its agent revoked (OpenedByKey): a new key opens a new session.
 */
export interface SessionCaller {
  caller: ResolvedAgent;
}

export interface McpSession {
  readonly id: string;
  readonly kind: McpSessionKind;
  readonly agentId: string;
  readonly state: SessionCaller;
  readonly transport: Transport & { readonly timers?: number };
  readonly server: { close(): Promise<void> };
  readonly subscriptions: ResourceSubscriptions;
}

interface Entry {
  session: McpSession;
  idle: NodeJS.Timeout | undefined;
  closing: Promise<void> | undefined;
  /** Stops watching the key that opened the session. */
  releaseKey: () => void;
}

export interface McpSessionStats {
  sessions: number;
  idleTimers: number;
  subscriptions: number;
  /** Keep-alive timers of legacy SSE streams (the SDK clears its own with each stream). */
  streamTimers: number;
}

/** Authenticates an MCP request as an agent (401 without a valid key; the admin token is refused). */
export async function authenticateMcp(ctx: GatewayContext, req: IncomingMessage): Promise<SessionCaller> {
  try {
    return { caller: await authenticateAgent(ctx, req) };
  } catch (err) {
    if (err instanceof AcpError && err.kind === "Unauthorized") throw mcpUnauthorized(err, req, "/mcp");
    throw err;
  }
}

export class McpSessions {
  readonly #entries = new Map<string, Entry>();

  constructor(
    private readonly idleMs: number,
    private readonly logger: Logger,
    private readonly openedByKey: OpenedByKey,
    /** Open sessions one agent may hold at once: each costs a server and its transport. */
    private readonly maxPerAgent = 64,
  ) {}

  /** Refuses a new session (429, -32013) when the agent already holds `maxPerAgent` of them. */
  assertRoom(agentId: string): void {
    let held = 0;
    for (const entry of this.#entries.values())
      if (entry.session.agentId === agentId && !entry.closing) held++;
    if (held >= this.maxPerAgent) {
      throw new AcpError(
        "RateLimited",
        `${agentId} already holds ${held} MCP sessions: close one (DELETE /mcp) or let one expire`,
        { limit: this.maxPerAgent, retryAfterSeconds: 60 },
      );
    }
  }

  add(session: McpSession): void {
    const entry: Entry = { session, idle: undefined, closing: undefined, releaseKey: () => undefined };
    entry.releaseKey = this.openedByKey.track(session.state.caller, (why) => void this.#close(entry, why));
    entry.idle = setTimeout(() => void this.#close(entry, "idle"), this.idleMs);
    entry.idle.unref();
    this.#entries.set(session.id, entry);
    this.logger.debug(
      { session: session.id, agent: session.agentId, kind: session.kind },
      "MCP session opened",
    );
  }

  /**
   * The session `id` for a request authenticated as `who`: 404 when it does not exist (never did,
   * expired or closed), 403 when another agent opened it. Counts as traffic.
   */
  claim(id: string, kind: McpSessionKind, who: SessionCaller): McpSession {
    const entry = this.#entries.get(id);
    if (!entry || entry.closing || entry.session.kind !== kind) {
      throw new AcpError("NotFound", `no MCP session ${id} (it expired or was closed): initialize a new one`);
    }
    if (entry.session.agentId !== who.caller.record.agentId) {
      throw new AcpError("Forbidden", `MCP session ${id} belongs to another agent`);
    }
    entry.session.state.caller = who.caller;
    this.touch(id);
    return entry.session;
  }

  /** Traffic on the session: its idle clock starts again. */
  touch(id: string): void {
    this.#entries.get(id)?.idle?.refresh();
  }

  has(id: string): boolean {
    return this.#entries.has(id);
  }

  close(id: string, why: string): Promise<void> {
    const entry = this.#entries.get(id);
    return entry ? this.#close(entry, why) : Promise.resolve();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#entries.values()].map((entry) => this.#close(entry, "gateway closing")));
  }

  stats(): McpSessionStats {
    let idleTimers = 0;
    let subscriptions = 0;
    let streamTimers = 0;
    for (const { session, idle } of this.#entries.values()) {
      if (idle !== undefined) idleTimers++;
      subscriptions += session.subscriptions.size;
      streamTimers += session.transport.timers ?? 0;
    }
    return { sessions: this.#entries.size, idleTimers, subscriptions, streamTimers };
  }

  #close(entry: Entry, why: string): Promise<void> {
    entry.closing ??= (async () => {
      const { session } = entry;
      entry.releaseKey();
      clearTimeout(entry.idle);
      entry.idle = undefined;
      session.subscriptions.close();
      // Closes the transport too (ending its streams) and aborts the session's runs.
      await session.server
        .close()
        .catch((err: Error) =>
          this.logger.warn({ session: session.id, err: err.message }, "closing an MCP session failed"),
        );
      this.#entries.delete(session.id);
      this.logger.debug({ session: session.id, agent: session.agentId, why }, "MCP session closed");
    })();
    return entry.closing;
  }
}
