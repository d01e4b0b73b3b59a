import type { NatsConnection } from "@nats-io/transport-node";
import { BrokerError, notRecipient } from "../errors.js";
import { ackWaitFor, type BrokerPolicy } from "../policy.js";
import { buildRecord, currentStatus } from "../records.js";
import type { MessageRecord, MessageRef } from "../types.js";
import type { NatsInbox } from "./inbox.js";
import type { NatsRouted } from "./routed.js";
import type { StreamPublisher } from "./publisher.js";
import type { StatusDoc, StatusStore } from "./status-store.js";

/**
 * Acknowledging, rejecting, and extending a delivery's ack wait. The status record decides
 * (recipient, state) with compare-and-set; then JetStream is told through the live delivery if it
 * is in this process, else through the ack subject recorded at delivery, so it reaches the
 * consumer whichever gateway holds it.
 */
export class Settlement {
  constructor(
    private readonly nc: NatsConnection,
    private readonly publisher: StreamPublisher,
    private readonly statuses: StatusStore,
    private readonly policy: BrokerPolicy,
    private readonly inboxOf: (agentId: string) => NatsInbox | undefined,
    private readonly routedOf: (agentId: string) => NatsRouted | undefined,
    /** A message this settlement took from pending to settled (quota usage ends). */
    private readonly settled: (doc: StatusDoc) => void,
  ) {}

  async settle(
    agentId: string,
    message: MessageRef,
    action: "ack" | "reject",
    detail: string,
  ): Promise<MessageRecord> {
    const { id } = message;
    const now = Date.now();
    const [doc, changed] = await this.statuses.mutate<[StatusDoc, boolean]>(message, (current) => {
      const value = recipientsRecord(current?.value, agentId, message);
      const status = currentStatus(value, this.policy, now);
      if (action === "ack" && status === "acknowledged") return { result: [value, false] };
      if (status !== "queued" && status !== "delivered") {
        throw new BrokerError("invalid_state", `message ${id} is ${status}; it can no longer be ${action}ed`);
      }
      const next: StatusDoc =
        action === "ack"
          ? { ...value, status: "acknowledged", acknowledgedAt: now, dueAt: undefined }
          : {
              ...value,
              status: "failed",
              failedAt: now,
              dueAt: undefined,
              lastError: detail,
              deadLetter: { reason: "rejected", detail },
            };
      return { next, result: [next, true] };
    });
    if (changed) this.settled(doc);
    // No need to wait for the server (ackAck): the status is already settled, so if this ack were
    // lost the redelivery would be acknowledged silently by the inbox.
    this.publisher.turnWrites.hold();
    const live = this.inboxOf(agentId)?.take(message);
    if (live) {
      if (action === "ack") live.ack();
      else live.term();
    } else if (this.routedOf(agentId)?.take(message)) {
      // Routed: JetStream's copy is acknowledged by whichever inbox meets it next, seeing the status.
    } else if (doc.ackSubject) {
      // Handed out through another gateway: its ack subject reaches that consumer from here.
      this.nc.publish(doc.ackSubject, action === "ack" ? "+ACK" : "+TERM");
    }
    // Never handed out: the inbox skips it when it comes, seeing the status.
    return buildRecord(doc, this.policy, Date.now());
  }

  /** Moves the record's `dueAt`, then has JetStream restart the ack wait (`+WPI`) wherever the delivery is. */
  async working(agentId: string, message: MessageRef): Promise<void> {
    const { id } = message;
    const now = Date.now();
    const doc = await this.statuses.mutate<StatusDoc>(message, (current) => {
      const value = recipientsRecord(current?.value, agentId, message);
      const status = currentStatus(value, this.policy, now);
      if (status !== "delivered")
        throw new BrokerError("invalid_state", `message ${id} is ${status}, not out for delivery`);
      const next: StatusDoc = { ...value, dueAt: now + ackWaitFor(this.policy, value.attempts) };
      return { next, result: next };
    });
    const dueAt = doc.dueAt ?? now;
    if (this.inboxOf(agentId)?.extend(message, dueAt) || this.routedOf(agentId)?.extend(message, dueAt))
      return;
    if (doc.ackSubject) this.nc.publish(doc.ackSubject, "+WPI");
  }
}

/** The record of `message`, if `agentId` is its recipient (to a third agent: no such message). */
function recipientsRecord(value: StatusDoc | undefined, agentId: string, message: MessageRef): StatusDoc {
  if (!value) throw new BrokerError("not_found", `no message ${message.id}`);
  if (value.to !== agentId) throw notRecipient(message.from, message.id, agentId);
  return value;
}
