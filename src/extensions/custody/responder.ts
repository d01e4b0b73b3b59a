/**
 * The gateway's side of a custodial agent's inbox. A custodial agent has no process of its own (its
 * MCP clients only call tools), so the gateway answers for it what needs its signature before any
 * work can reach it: the handshake. A peer's `agent.announce` is answered with the agent's announce
 * and capabilities, signed in custody and submitted through the relay in-process, so the gateway's
 * handshake gate, persistence and audit apply as to any agent. Other notifications and handoffs are
 * acknowledged (their state is what the MCP task resources show); a request is rejected with a
 * reason, since nobody is there to answer it.
 */
import type { Delivery, Inbox, Unsubscribe } from "../../broker/index.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { AgentRecord, Custodian } from "../../gateway/registry.js";
import {
  custodialAnnounce,
  custodialCapabilities,
  custodialSender,
  submitInCustody,
} from "../../gateway/custodial.js";

export class CustodialResponder {
  private readonly inboxes = new Map<string, Inbox>();
  private readonly serving = new Set<Promise<void>>();
  private unwatch: Unsubscribe | undefined;
  private closed = false;

  constructor(
    private readonly ctx: Pick<GatewayContext, "broker" | "registry" | "relay" | "logger">,
    private readonly custodian: Custodian,
  ) {}

  /** Serves every custodial agent's inbox, and each new one as it is registered. */
  async start(): Promise<void> {
    const agents = this.ctx.broker.kv<AgentRecord>("agents");
    this.unwatch = await agents.watch((change) => {
      if (change.value?.custodial && !change.value.revokedAt) void this.open(change.value.agentId);
      else if (change.value?.revokedAt) void this.closeInbox(change.key);
    });
    for (const record of await this.ctx.registry.list()) {
      if (record.custodial && !record.revokedAt) await this.open(record.agentId);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unwatch?.();
    await Promise.all([...this.inboxes.keys()].map((id) => this.closeInbox(id)));
    await Promise.allSettled(this.serving);
  }

  private async open(agentId: string): Promise<void> {
    if (this.closed || this.inboxes.has(agentId)) return;
    const inbox = await this.ctx.broker.openInbox(agentId);
    if (this.closed || this.inboxes.has(agentId)) {
      await inbox.close();
      return;
    }
    this.inboxes.set(agentId, inbox);
    const serving = this.serve(agentId, inbox).finally(() => this.serving.delete(serving));
    this.serving.add(serving);
  }

  private async closeInbox(agentId: string): Promise<void> {
    const inbox = this.inboxes.get(agentId);
    this.inboxes.delete(agentId);
    await inbox?.close();
  }

  private async serve(agentId: string, inbox: Inbox): Promise<void> {
    try {
      for await (const delivery of inbox) {
        await this.handle(agentId, delivery).catch((err: unknown) =>
          // Left unacknowledged: redelivered after the ack wait, and failed after the last attempt.
          this.ctx.logger.warn(
            { agent: agentId, message: delivery.id, err: (err as Error).message },
            "custodial inbox: could not handle a message",
          ),
        );
      }
    } catch (err) {
      if (!this.closed) {
        this.ctx.logger.error({ agent: agentId, err: (err as Error).message }, "custodial inbox failed");
      }
    }
  }

  private async handle(agentId: string, delivery: Delivery): Promise<void> {
    const { broker } = this.ctx;
    if (delivery.kind === "request") {
      await broker.reject(
        agentId,
        delivery,
        `${agentId} is a custodial agent: it works only through the gateway (MCP task tools, REST messages), and answers no requests`,
      );
      return;
    }
    if (delivery.method === "agent.announce") await this.answerAnnounce(agentId, delivery);
    await broker.ack(agentId, delivery);
  }

  /** Step 1 answered: the agent's own announce (a reply) and its capabilities, signed in custody. */
  private async answerAnnounce(agentId: string, delivery: Delivery): Promise<void> {
    const announce = JSON.parse(delivery.envelope) as {
      params: { headers: Record<string, unknown>; body: { reply?: unknown } };
    };
    const self = await this.ctx.registry.resolve(agentId);
    const peer = await this.ctx.registry.resolve(delivery.from);
    if (!self || !peer) return; // revoked meanwhile: nobody to answer, or for
    const sender = custodialSender(this.ctx.registry, self.record, peer.record);
    // A reply announce proves the peer has ours; answering it with another would loop.
    const messages = [
      ...(announce.params.body.reply === true
        ? []
        : [custodialAnnounce(sender, self.record, delivery.from, true)]),
      custodialCapabilities(sender, self.record, delivery.from),
    ];
    await submitInCustody(this.custodian, this.ctx.relay, self, messages);
  }
}
