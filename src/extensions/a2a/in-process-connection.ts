/**
 * An agent's connection to the gateway it runs in: submissions go straight into the relay (the
 * same checks, persistence and audit as the WebSocket's `submit`), deliveries come from the
 * agent's broker inbox, acknowledgements go to the broker. No socket, no frames to serialize and
 * parse twice, no self-call over TCP: what the bridge agents use instead of a WebSocket to the
 * gateway's own port.
 */
import type { Inbox } from "../../broker/index.js";
import type { AgentConnection, ConnectionEvents } from "../../client/connection.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import type { SubmitResponse } from "../../wire/api.js";
import { AcpError } from "../../protocol/index.js";

/** Deliveries handed out before the agent acknowledges (as the WebSocket hub allows). */
const MAX_IN_FLIGHT = 256;

export class InProcessConnection implements AgentConnection {
  #ready = false;
  #closed = false;
  #agent: ResolvedAgent | undefined;
  #inbox: Inbox | undefined;
  #pump: Promise<void> | undefined;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly agentId: string,
    private readonly events: ConnectionEvents,
  ) {}

  get isReady(): boolean {
    return this.#ready;
  }

  async connect(): Promise<void> {
    if (this.#closed) throw new AcpError("Cancelled", "this connection was closed");
    this.#agent = await this.ctx.registry.resolve(this.agentId);
    if (!this.#agent)
      throw new AcpError("Unauthorized", `agent ${this.agentId} is not registered (or revoked)`);
    this.#inbox = await this.ctx.broker.openInbox(this.agentId, { maxInFlight: MAX_IN_FLIGHT });
    await this.ctx.presence.connected(this.agentId).catch(() => undefined);
    this.#ready = true;
    this.events.connected({ gateway: this.ctx.gatewayId, heartbeatMs: 0, reconnected: false });
    this.#pump = this.#deliver(this.#inbox);
  }

  submit(envelope: Record<string, unknown>): Promise<SubmitResponse> {
    const agent = this.#agent;
    if (this.#closed || !agent) return Promise.reject(new AcpError("Cancelled", "the agent is closed"));
    const text = JSON.stringify(envelope);
    return this.ctx.relay.submit(agent, text, Buffer.byteLength(text));
  }

  acknowledge(id: string): boolean {
    if (!this.#ready) return false;
    this.ctx.broker.ack(this.agentId, id).catch((err: unknown) => this.events.error(err as Error));
    return true;
  }

  reject(id: string, reason: string): boolean {
    if (!this.#ready) return false;
    this.ctx.broker
      .reject(this.agentId, id, reason.slice(0, 1000) || "rejected")
      .catch((err: unknown) => this.events.error(err as Error));
    return true;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const wasReady = this.#ready;
    this.#ready = false;
    await this.#inbox?.close().catch(() => undefined);
    await this.#pump?.catch(() => undefined);
    if (wasReady) await this.ctx.presence.disconnected(this.agentId).catch(() => undefined);
  }

  async #deliver(inbox: Inbox): Promise<void> {
    for await (const delivery of inbox) {
      if (this.#closed) break;
      this.events.message({
        type: "new_message",
        id: delivery.id,
        from: delivery.from,
        kind: delivery.kind,
        method: delivery.method,
        attempt: delivery.attempt,
        envelope: JSON.parse(delivery.envelope) as Record<string, unknown>,
      });
    }
  }
}
