import { EventEmitter } from "node:events";
import type { StatusEvent, StatusRecord } from "../collab/contracts.js";
import { CollabMethod, GATEWAY_COLLAB_PRINCIPAL, type StatusBody } from "../collab/messages.js";
import { AcpError } from "../protocol/index.js";
import type { Presence } from "../wire/api.js";
import { API_PREFIX } from "../wire/api.js";
import { type CollabClientOptions, CollabCore, path } from "./collab-core.js";
import { HandoffClient } from "./collab-handoff.js";
import { NegotiationClient } from "./collab-negotiate.js";
import { TeamClient } from "./collab-team.js";
import { GatewayUnreachableError } from "./errors.js";
import type { InboundContext } from "./types.js";
import { camelCased } from "../wire/deprecated-names.js";

export type { CollabClientOptions } from "./collab-core.js";
export type { HandoffDecision, HandoffOffer } from "./collab-handoff.js";
export type {
  NegotiationDecision,
  NegotiationHistory,
  NegotiationStrategy,
  NegotiationTurn,
} from "./collab-negotiate.js";
export type { PostView, VoteView } from "./collab-team.js";
export { HandoffClient, NegotiationClient, TeamClient };

/** A verified collaboration message another agent sent this one. */
export interface CollabNotice {
  method: string;
  from: string;
  body: Record<string, unknown>;
  context: InboundContext;
}

export interface CollabEvents {
  /** Proposals, counters, acceptances and rejections addressed to this agent. */
  negotiation: (notice: CollabNotice) => void;
  /** Handoff state changes and progress reports from the other party. */
  handoff: (notice: CollabNotice) => void;
  /** Channel messages, votes opened and results announced in this agent's teams. */
  channel: (notice: CollabNotice) => void;
  /** Disputes opened about something this agent is involved in. */
  dispute: (notice: CollabNotice) => void;
  /** A strategy run by `onProposal` failed (its session is left to the peer or to expiry). */
  error: (err: Error) => void;
}

export interface StatusSubscription {
  /** Resolves once the gateway accepted the subscription (the current presences follow). */
  ready: Promise<void>;
  close(): void;
}

/**
 * The collaboration SDK: negotiation, task handoffs with escrow, status broadcasting, and teams
 * (channels, votes, knowledge, disputes), every change a message signed by this agent. Give it the
 * connected AcpAgent of the same identity so it can handshake with peers and hear what they send.
 * See docs/collab.md.
 */
export class CollabClient {
  readonly negotiations: NegotiationClient;
  readonly handoffs: HandoffClient;
  readonly teams: TeamClient;
  private readonly core: CollabCore;
  private readonly emitter = new EventEmitter();

  constructor(options: CollabClientOptions) {
    this.core = new CollabCore(options);
    this.negotiations = new NegotiationClient(this.core, (err) => {
      // An unheard "error" must not crash the process (EventEmitter would throw it).
      if (this.emitter.listenerCount("error") > 0) this.emitter.emit("error", err);
      else process.emitWarning(err.message, { code: "ACP_COLLAB_ERROR" });
    });
    this.handoffs = new HandoffClient(this.core);
    this.teams = new TeamClient(this.core);
    this.emitter.setMaxListeners(0);
    options.agent?.onNotification((body, context) => this.dispatch(body, context));
  }

  /** The agent this client acts for. */
  get agentId(): string {
    return this.core.agentId;
  }

  /** Listens to a collaboration event (`CollabEvents`); without an `error` listener, errors become warnings. */
  on<K extends keyof CollabEvents>(event: K, listener: CollabEvents[K]): this {
    this.emitter.on(event, listener);
    return this;
  }

  /** Removes a listener added with `on`. */
  off<K extends keyof CollabEvents>(event: K, listener: CollabEvents[K]): this {
    this.emitter.off(event, listener);
    return this;
  }

  /** Handles tasks offered to this agent (see HandoffClient.onOffer). */
  onHandoffOffer(decide: Parameters<HandoffClient["onOffer"]>[1]): this {
    if (!this.core.agent)
      throw new AcpError("InvalidParams", "onHandoffOffer needs the connected agent (option agent)");
    this.handoffs.onOffer(this.core.agent, decide);
    return this;
  }

  /** Publishes this agent's availability, load, health metrics and tasks as a signed status. */
  async publishStatus(
    update: StatusBody,
  ): Promise<{ agentId: string; presence: Presence; status: StatusRecord }> {
    const { message } = await this.core.sign(CollabMethod.status, this.core.agentId, update);
    return this.core.call("POST", "/status", message);
  }

  /** An agent's presence and latest signed status (null before it published one). */
  status(agentId: string): Promise<{ agentId: string; presence: Presence; status: StatusRecord | null }> {
    return this.core.call("GET", `/status/${path(agentId)}`);
  }

  /**
   * Follows the presence (online/offline from connections, busy/away, load, tasks) and signed
   * statuses of `agents` (all agents when omitted) as they change.
   */
  subscribeStatus(handler: (event: StatusEvent) => void, agents?: string[]): StatusSubscription {
    const abort = new AbortController();
    const query = agents ? `?agents=${agents.map(encodeURIComponent).join(",")}` : "";
    const url = `${this.core.baseUrl}${API_PREFIX}/status/stream${query}`;
    let resolveReady!: () => void;
    let rejectReady!: (err: unknown) => void;
    const ready = new Promise<void>((resolve, reject) => {
      resolveReady = resolve;
      rejectReady = reject;
    });
    void (async () => {
      let response: Response;
      try {
        response = await fetch(url, {
          headers: { accept: "text/event-stream", "x-api-key": this.core.apiKey },
          signal: abort.signal,
        });
      } catch (err) {
        rejectReady(
          abort.signal.aborted
            ? new AcpError("Cancelled")
            : new GatewayUnreachableError(this.core.baseUrl, err),
        );
        return;
      }
      if (!response.ok || !response.body) {
        rejectReady(new AcpError("InternalError", `status stream: the gateway answered ${response.status}`));
        return;
      }
      resolveReady();
      const decoder = new TextDecoder();
      let buffer = "";
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end = buffer.indexOf("\n\n");
          while (end >= 0) {
            const data = buffer
              .slice(0, end)
              .split("\n")
              .filter((line) => line.startsWith("data: "))
              .map((line) => line.slice(6))
              .join("\n");
            buffer = buffer.slice(end + 2);
            if (data) handler(camelCased(JSON.parse(data)) as StatusEvent);
            end = buffer.indexOf("\n\n");
          }
        }
      } catch {
        // Closed by close() or by the gateway: the subscription simply ends.
      }
    })();
    ready.catch(() => undefined);
    return { ready, close: () => abort.abort() };
  }

  private dispatch(body: Record<string, unknown>, context: InboundContext): void {
    // Only the gateway decides an expiry: the same words from any other agent are not passed on.
    if (context.method === CollabMethod.handoffExpired && context.principalId !== GATEWAY_COLLAB_PRINCIPAL)
      return;
    const notice: CollabNotice = { method: context.method, from: context.from, body, context };
    const domain = context.method.split(".")[1];
    if (domain === "negotiation") {
      this.negotiations.dispatch(context.method, body);
      this.emitter.emit("negotiation", notice);
    } else if (domain === "handoff") this.emitter.emit("handoff", notice);
    else if (domain === "team" || domain === "vote") this.emitter.emit("channel", notice);
    else if (domain === "dispute") this.emitter.emit("dispute", notice);
  }
}
