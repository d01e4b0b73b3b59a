import {
  type ConsumerInfo,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { BrokerError } from "../errors.js";
import type { BrokerPolicy } from "../policy.js";
import { replySubject } from "./headers.js";
import { NatsInbox, type NatsInboxHost } from "./inbox.js";
import { consumerName, INBOX_STREAM, inboxConsumerConfig } from "./layout.js";
import type { Orphans } from "./orphans.js";

/** JetStream: "consumer already exists" (a create whose config differs from the existing one's). */
const CONSUMER_EXISTS = 10148;

/** What opening inboxes needs from the broker (the rest of what an inbox needs from it). */
export type InboxesHost = Omit<NatsInboxHost, "reclaim" | "instanceAlive" | "released" | "redeliverNow">;

/**
 * The agents' inboxes open in this broker: each a pull on the agent's durable consumer, one per
 * agent. Also what those inboxes ask of the broker about the consumer itself: giving deliveries
 * back, and taking back what a dead gateway held (orphans.ts).
 */
export class NatsInboxes {
  private readonly inboxes = new Map<string, NatsInbox>();
  /** Agents whose inbox is being opened (consumer set-up in progress): a second open must fail too. */
  private readonly opening = new Set<string>();
  private readonly inboxHost: NatsInboxHost;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    private readonly policy: BrokerPolicy,
    private readonly orphans: Orphans,
    host: InboxesHost,
  ) {
    this.inboxHost = {
      get policy() {
        return host.policy;
      },
      get instanceId() {
        return host.instanceId;
      },
      get statuses() {
        return host.statuses;
      },
      get ledger() {
        return host.ledger;
      },
      working: (agentId, id) => host.working(agentId, id),
      pendingSettled: (doc) => host.pendingSettled(doc),
      warn: (message) => host.warn(message),
      redeliverNow: (agentId, msgs) => this.redeliverNow(agentId, msgs),
      reclaim: (agentId) => this.reclaim(agentId),
      instanceAlive: (id) => orphans.answers(id),
      released: (inbox) => {
        if (this.inboxes.get(inbox.agentId) === inbox) this.inboxes.delete(inbox.agentId);
      },
    };
  }

  get(agentId: string): NatsInbox | undefined {
    return this.inboxes.get(agentId);
  }

  async open(agentId: string, maxInFlight: number): Promise<NatsInbox> {
    // A closing inbox is still giving its deliveries back: the new one starts after that, so
    // they come first and in order.
    const closing = this.inboxes.get(agentId);
    if (closing?.isClosing) await closing.close();
    if (this.inboxes.has(agentId) || this.opening.has(agentId)) {
      throw new BrokerError("invalid_state", `the inbox of ${agentId} is already open in this broker`);
    }
    this.opening.add(agentId);
    try {
      const info = await this.consumer(agentId, maxInFlight);
      const consumer = this.js.consumers.getConsumerFromInfo(info);
      // A consumer deleted on the server ends the pull (the inbox then ends its iteration) rather than
      // leaving it waiting, silently, for a consumer only a new open would create again.
      const messages = await consumer.consume({ max_messages: maxInFlight, abort_on_missing_resource: true });
      const inbox = new NatsInbox(agentId, messages, this.inboxHost, Math.min(info.num_pending, maxInFlight));
      this.inboxes.set(agentId, inbox);
      // What a dead gateway handed out to this agent goes to the pull just opened (orphans.ts).
      void this.orphans.reclaim(agentId, info);
      return inbox;
    } finally {
      this.opening.delete(agentId);
    }
  }

  closeAll(): Promise<unknown> {
    return Promise.all([...this.inboxes.values()].map((inbox) => inbox.close()));
  }

  /**
   * The agent's durable consumer, created or brought to this config, in one request in the usual
   * case: a create with the config the consumer already has returns it as it is (nats-server 2.9
   * also updates it in place). A newer server refuses a create whose config differs (for example
   * another `maxInFlight`): then it is updated, keeping its delivery state. The answer is all the
   * pull consumer needs, so no separate look-up follows.
   */
  private async consumer(agentId: string, maxInFlight: number): Promise<ConsumerInfo> {
    const config = inboxConsumerConfig(agentId, this.policy, maxInFlight);
    try {
      return await this.jsm.consumers.add(INBOX_STREAM, config);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || error.code !== CONSUMER_EXISTS) throw error;
      return this.jsm.consumers.update(INBOX_STREAM, consumerName(agentId), config);
    }
  }

  private reclaim(agentId: string): void {
    void this.jsm.consumers
      .info(INBOX_STREAM, consumerName(agentId))
      .then((info) => this.orphans.reclaim(agentId, info))
      .catch(() => undefined); // no consumer yet, or NATS away: nothing to reclaim now
  }

  private async redeliverNow(agentId: string, msgs: JsMsg[]): Promise<void> {
    try {
      // nats-server (2.9) would still hand a redelivery to the closed inbox's last pull request,
      // whose subscriber is gone, and the message would then wait out its ack wait. Reading the
      // consumer's info makes the server drop such requests first.
      await this.jsm.consumers.info(INBOX_STREAM, consumerName(agentId));
    } catch {
      // Not reachable: the naks below fail too, and JetStream redelivers after the ack wait.
    }
    // Each nak waits for the server's confirmation: the consumer applies acks asynchronously, and
    // the next inbox's first pull must find these queued for redelivery, ahead of newer messages.
    await Promise.all(
      msgs.map((msg) =>
        this.nc.request(replySubject(msg) ?? "", "-NAK", { timeout: 5_000 }).catch(() => undefined),
      ),
    );
  }
}
