import type { JetStreamManager, JsMsg } from "@nats-io/jetstream";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { BrokerPolicy } from "../policy.js";
import { agentOfInboxSubject, DEAD_LETTER_QUEUE, deadLetterAdvisorySubject, INBOX_STREAM } from "./layout.js";
import type { StatusDoc, StatusStore } from "./status-store.js";

export interface DeadLetterHost {
  readonly policy: BrokerPolicy;
  readonly statuses: StatusStore;
  takeDelivery(agentId: string, id: string): JsMsg | undefined;
  warn(message: string): void;
}

interface MaxDeliveriesAdvisory {
  stream: string;
  consumer: string;
  stream_seq: number;
  deliveries: number;
}

/**
 * Records dead letters. JetStream publishes a MAX_DELIVERIES advisory when a message's last
 * delivery went unacknowledged; every gateway subscribes in one queue group, so exactly one of
 * them marks the status `failed`. The server sends it only while the consumer is pulling, i.e.
 * while the recipient's inbox is open somewhere.
 */
export class DeadLetters {
  private readonly subscription: Subscription;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly host: DeadLetterHost,
  ) {
    this.subscription = nc.subscribe(deadLetterAdvisorySubject(), {
      queue: DEAD_LETTER_QUEUE,
      callback: (error, msg) => {
        if (error) return;
        this.record(msg.json<MaxDeliveriesAdvisory>()).catch((cause: unknown) =>
          this.host.warn(`could not record a dead letter: ${String(cause)}`),
        );
      },
    });
  }

  stop(): void {
    this.subscription.unsubscribe();
  }

  private async record(advisory: MaxDeliveriesAdvisory): Promise<void> {
    if (advisory.stream !== INBOX_STREAM) return;
    const stored = await this.jsm.direct.getMessage(INBOX_STREAM, { seq: advisory.stream_seq });
    if (!stored) return; // gone with retention: it reads as expired
    const id = stored.header?.get("Nats-Msg-Id");
    const to = agentOfInboxSubject(stored.subject);
    if (!id || !to) return;
    const now = Date.now();
    const detail = `not acknowledged after ${advisory.deliveries} deliveries`;
    const failed = await this.host.statuses.mutate<StatusDoc | null>(id, (current) => {
      const value = current?.value;
      if (!value || value.seq !== advisory.stream_seq) return { result: null };
      if (value.status !== "queued" && value.status !== "delivered") return { result: null };
      const next: StatusDoc = {
        ...value,
        status: "failed",
        failedAt: now,
        attempts: advisory.deliveries,
        lastError: detail,
        deadLetter: { reason: "max-deliveries", detail },
      };
      return { next, result: next };
    });
    if (!failed) return;
    // Terminate it on the consumer too, so it stops counting against max_ack_pending.
    const live = this.host.takeDelivery(to, id);
    if (live) live.term(detail);
    else if (failed.ackSubject) this.nc.publish(failed.ackSubject, "+TERM");
  }
}
