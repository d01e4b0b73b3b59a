/**
 * An agent running inside the gateway (the A2A bridge agents, the MCP endpoint's bridge agent) and
 * its connection to that gateway: submissions go straight into the relay (the same checks,
 * persistence and audit as the WebSocket's `submit`), deliveries come from the agent's broker inbox,
 * acknowledgements go to the broker, registry look-ups and presence go to the registry and the
 * presence tracker. No socket, no frames to serialize and parse twice, no self-call over TCP, and
 * above all no address to reach: such an agent never sends its API key anywhere, so no request
 * (its Host header, a forwarded address) can steer it to another host.
 *
 * A delivery whose bytes are exactly those this process's relay accepted (and so validated and
 * verified against the sender's registered key) reaches the agent marked `verifiedByRelay`, with
 * the relay's parsed message: the agent does not parse and verify the same bytes a second time.
 * Anything else (a redelivery, a message another gateway accepted) is verified by the agent as usual.
 *
 * The other way, the relay fully verifies the agent's first submission; once that proved that the
 * agent's signer (fixed for its life) holds the registered key, later submissions are passed as
 * `signedHere`: the relay checks they name that key and skips re-verifying the gateway's own
 * signature. The recipient still verifies it.
 */
import type { Inbox } from "../broker/index.js";
import type { AgentConnection, ConnectionEvents, DeliveredRef } from "../client/connection.js";
import type { AcpAgentOptions, AgentDirectory } from "../client/types.js";
import type { GatewayContext } from "../gateway/context.js";
import type { ResolvedAgent } from "../gateway/registry.js";
import type { AcceptedMessage } from "../gateway/relay-types.js";
import { viewOfRef } from "../gateway/routes/agents.js";
import { AcpError, type EnvelopeHeaders, headersOf, type VerifiedEnvelope } from "../protocol/index.js";
import { type AgentView, presenceView } from "../wire/agents.js";
import type { PresenceUpdate, SubmitResponse } from "../wire/api.js";
import { type WithDeprecatedNames, withDeprecatedNames } from "../wire/deprecated-names.js";

/**
 * The `gateway` URL of an in-process agent. It is never used (`connection` and `directory` replace
 * every call), and `.invalid` never resolves (RFC 6761): were a call to slip through, it would fail
 * here rather than reach a host.
 */
export const IN_PROCESS_GATEWAY = "http://in-process.invalid";

/** The options that make an AcpAgent one of the gateway's own, reaching it in process. */
export function inProcessAgentOptions(
  ctx: GatewayContext,
): Required<Pick<AcpAgentOptions, "gateway" | "connection" | "directory">> {
  return {
    gateway: IN_PROCESS_GATEWAY,
    connection: (agentId, events) => new InProcessConnection(ctx, agentId, events),
    directory: new InProcessDirectory(ctx),
  };
}

/** The registry and presence, as GET /api/v1/agents/:id and PUT …/presence give them to an agent. */
export class InProcessDirectory implements AgentDirectory {
  constructor(private readonly ctx: GatewayContext) {}

  async getAgent(agentId: string): Promise<WithDeprecatedNames<AgentView>> {
    const view = await viewOfRef(this.ctx, agentId);
    if (!view) throw new AcpError("NotFound", `no registered agent ${agentId}`);
    return withDeprecatedNames(view);
  }

  async updatePresence(agentId: string, update: PresenceUpdate): Promise<unknown> {
    await this.ctx.presence.update(agentId, update);
    return withDeprecatedNames(presenceView(await this.ctx.presence.get(agentId)));
  }
}

/** Deliveries handed out before the agent acknowledges (as the WebSocket hub allows). */
const MAX_IN_FLIGHT = 256;
/** Relay-verified messages kept for in-process recipients until delivered; past it the oldest go (and are verified again). */
const MAX_VERIFIED = 4096;

export class InProcessConnection implements AgentConnection {
  #ready = false;
  #closed = false;
  #agent: ResolvedAgent | undefined;
  #inbox: Inbox | undefined;
  #pump: Promise<void> | undefined;
  /** Keeps its presence fresh, as a socket's heartbeats do: online for as long as it is connected. */
  #heartbeat: NodeJS.Timeout | undefined;
  /** A submission of this agent passed the relay's full signature check. */
  #keyProven = false;
  readonly #verified: VerifiedByRelay;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly agentId: string,
    private readonly events: ConnectionEvents,
  ) {
    this.#verified = VerifiedByRelay.of(ctx);
  }

  get isReady(): boolean {
    return this.#ready;
  }

  async connect(): Promise<void> {
    if (this.#closed) throw new AcpError("Cancelled", "this connection was closed");
    this.#agent = await this.ctx.registry.resolve(this.agentId);
    if (!this.#agent)
      throw new AcpError("Unauthorized", `agent ${this.agentId} is not registered (or revoked)`);
    this.#verified.watch(this.agentId);
    this.#inbox = await this.ctx.broker.openInbox(this.agentId, { maxInFlight: MAX_IN_FLIGHT });
    const { presence } = this.ctx;
    await presence.connected(this.agentId).catch(() => undefined);
    this.#heartbeat = setInterval(
      () => void presence.heartbeat(this.agentId).catch(() => undefined),
      presence.staleAfterMs / 3,
    );
    this.#heartbeat.unref();
    this.#ready = true;
    this.events.connected({
      gateway: this.ctx.gatewayId,
      heartbeatMs: 0,
      ackWaitMs: this.ctx.broker.ackWaitMs,
      reconnected: false,
    });
    this.#pump = this.#deliver(this.#inbox);
  }

  submit(envelope: Record<string, unknown>): Promise<SubmitResponse> {
    const agent = this.#agent;
    if (this.#closed || !agent) return Promise.reject(new AcpError("Cancelled", "the agent is closed"));
    const text = JSON.stringify(envelope);
    const signedHere = this.#keyProven;
    const submitted = this.ctx.relay.submit(agent, text, Buffer.byteLength(text), { signedHere });
    submitted.then(
      () => {
        this.#keyProven = true;
        this.events.succeeded();
      },
      () => undefined,
    );
    return submitted;
  }

  acknowledge(message: DeliveredRef): boolean {
    if (!this.#ready) return false;
    // Not taken (a NATS election): the redelivery repairs it, so the agent reads as degraded.
    this.ctx.broker.ack(this.agentId, message).catch((err: unknown) => this.events.degraded(err as Error));
    return true;
  }

  reject(message: DeliveredRef, reason: string): boolean {
    if (!this.#ready) return false;
    this.ctx.broker
      .reject(this.agentId, message, reason.slice(0, 1000) || "rejected")
      .catch((err: unknown) => this.events.degraded(err as Error));
    return true;
  }

  working(message: DeliveredRef): boolean {
    if (!this.#ready) return false;
    // Refused only for a message no longer out (settled meanwhile): nothing to report.
    this.ctx.broker.working(this.agentId, message).catch(() => undefined);
    return true;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#heartbeat);
    const wasReady = this.#ready;
    this.#ready = false;
    if (this.#agent) this.#verified.unwatch(this.agentId);
    await this.#inbox?.close().catch(() => undefined);
    await this.#pump?.catch(() => undefined);
    if (wasReady) await this.ctx.presence.disconnected(this.agentId).catch(() => undefined);
  }

  async #deliver(inbox: Inbox): Promise<void> {
    for await (const delivery of inbox) {
      if (this.#closed) break;
      const verifiedByRelay = this.#verified.take(delivery.id, delivery.envelope);
      this.events.succeeded();
      this.events.message({
        type: "new_message",
        id: delivery.id,
        from: delivery.from,
        kind: delivery.kind,
        method: delivery.method,
        attempt: delivery.attempt,
        priority: delivery.priority,
        envelope: (verifiedByRelay?.message ?? JSON.parse(delivery.envelope)) as Record<string, unknown>,
        ...(verifiedByRelay && { verifiedByRelay }),
      });
    }
  }
}

/** The messages this gateway's relay accepted for its in-process agents, until delivered: one per gateway. */
class VerifiedByRelay {
  static readonly #byGateway = new WeakMap<GatewayContext, VerifiedByRelay>();
  /** In-process agents and how many connections each has. */
  readonly #recipients = new Map<string, number>();
  readonly #accepted = new Map<string, { envelope: string; verified: VerifiedEnvelope }>();
  #unsubscribe: (() => void) | undefined;

  private constructor(private readonly ctx: GatewayContext) {}

  static of(ctx: GatewayContext): VerifiedByRelay {
    let shared = VerifiedByRelay.#byGateway.get(ctx);
    if (!shared) {
      shared = new VerifiedByRelay(ctx);
      VerifiedByRelay.#byGateway.set(ctx, shared);
    }
    return shared;
  }

  watch(agentId: string): void {
    this.#recipients.set(agentId, (this.#recipients.get(agentId) ?? 0) + 1);
    this.#unsubscribe ??= this.ctx.relay.onAccepted((accepted) => this.#keep(accepted));
  }

  unwatch(agentId: string): void {
    const count = (this.#recipients.get(agentId) ?? 0) - 1;
    if (count > 0) this.#recipients.set(agentId, count);
    else this.#recipients.delete(agentId);
    if (this.#recipients.size > 0) return;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#accepted.clear();
  }

  /** The relay's verification of message `id`, if `envelope` is byte for byte what it verified. */
  take(id: string, envelope: string): VerifiedEnvelope | undefined {
    const kept = this.#accepted.get(id);
    if (!kept) return undefined;
    this.#accepted.delete(id);
    return kept.envelope === envelope ? kept.verified : undefined;
  }

  #keep({ id, to, envelope, message, verifiedKid: kid, stored }: AcceptedMessage): void {
    // Only what the relay verified itself (not a signature another in-process agent made).
    if (kid === undefined || !this.#recipients.has(to)) return;
    if (this.#accepted.size >= MAX_VERIFIED) {
      const oldest = this.#accepted.keys().next().value;
      if (oldest !== undefined) this.#accepted.delete(oldest);
    }
    const headers = headersOf(message) as EnvelopeHeaders;
    this.#accepted.set(id, { envelope, verified: { message, headers, kid } });
    // A resubmission or a refused write is not delivered (again): nothing to keep.
    stored.then(
      (result) => result.duplicate && this.#accepted.delete(id),
      () => this.#accepted.delete(id),
    );
  }
}
